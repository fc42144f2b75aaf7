//! The Kubernetes objects the build system applies for an organization: its
//! namespace, what its tier lets its builds use (a `ResourceQuota` and a
//! `LimitRange`), a default-deny `NetworkPolicy` that lets builds reach the image
//! registry only, and the `ServiceAccount` builds run as.
//!
//! The same inputs always give the same objects, in the same order, with their maps
//! sorted (`BTreeMap`), so that a digest of their serialization identifies them.
//!
//! ```
//! use entitlements::*;
//! let entitlement = effective(&Catalog::default(), &Account::on(Tier::Pro));
//! let objects = build_namespace(&NamespaceInput {
//!     org_id: "5b1f0c8e-0000-4000-8000-000000000001",
//!     org_name: "Acme",
//!     entitlement: &entitlement,
//!     registry: Some(RegistryAddress { host: "10.0.0.7", port: 5000 }),
//! });
//! assert_eq!(objects.len(), 5);
//! assert_eq!(objects[0].kind, "Namespace");
//! assert_eq!(objects[0].metadata.name, "org-5b1f0c8e-0000-4000-8000-000000000001");
//! ```

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::{Dimension, Entitlement, Limit, Tier};

/// Where builds pull and push images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryAddress<'a> {
    /// A host name or an IP address.
    pub host: &'a str,
    /// Its port.
    pub port: u16,
}

/// What the objects are made from.
#[derive(Debug, Clone, Copy)]
pub struct NamespaceInput<'a> {
    /// The organization's id.
    pub org_id: &'a str,
    /// Its name (a label value, cleaned).
    pub org_name: &'a str,
    /// Its effective entitlement (tier and limits).
    pub entitlement: &'a Entitlement,
    /// The image registry, when one is configured.
    pub registry: Option<RegistryAddress<'a>>,
}

/// An object's metadata.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metadata {
    /// Its name.
    pub name: String,
    /// Its namespace (absent on the namespace itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// One Kubernetes object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeObject {
    /// `v1`, `networking.k8s.io/v1`.
    pub api_version: &'static str,
    /// `Namespace`, `ResourceQuota`, ...
    pub kind: &'static str,
    /// Name, namespace, labels.
    pub metadata: Metadata,
    /// The object's `spec` (absent on a namespace and a service account).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<Value>,
    /// A service account's token is not mounted unless a pod asks for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub automount_service_account_token: Option<bool>,
}

/// What one tier's builds may use at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildCompute {
    /// Builds running at once (pods).
    pub pods: u32,
    /// CPU cores requested in all, and the limit in all.
    pub cpu: u32,
    /// Memory in GiB requested in all, and the limit in all.
    pub memory_gib: u32,
    /// One build container's default and largest CPU (millicores).
    pub container_cpu_millis: u32,
    /// One build container's default and largest memory (MiB).
    pub container_memory_mib: u32,
}

/// The compute each tier's builds get.
pub fn build_compute(tier: Tier) -> BuildCompute {
    match tier {
        Tier::Developer => BuildCompute {
            pods: 2,
            cpu: 2,
            memory_gib: 4,
            container_cpu_millis: 1000,
            container_memory_mib: 2048,
        },
        Tier::Pro => BuildCompute {
            pods: 5,
            cpu: 8,
            memory_gib: 16,
            container_cpu_millis: 2000,
            container_memory_mib: 4096,
        },
        Tier::Team => BuildCompute {
            pods: 10,
            cpu: 16,
            memory_gib: 32,
            container_cpu_millis: 2000,
            container_memory_mib: 4096,
        },
        Tier::Enterprise => BuildCompute {
            pods: 25,
            cpu: 48,
            memory_gib: 96,
            container_cpu_millis: 4000,
            container_memory_mib: 8192,
        },
    }
}

/// The namespace's name: `org-` and the id when the id is a DNS label's characters
/// (lower-case letters, digits, `-`) and short enough, else `org-` and a stable
/// digest of it (64 bits of FNV-1a, hex), so that any id gives a valid name.
pub fn namespace_name(org_id: &str) -> String {
    let plain = !org_id.is_empty()
        && org_id.len() <= 59
        && org_id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !org_id.ends_with('-');
    if plain {
        format!("org-{org_id}")
    } else {
        format!("org-{:016x}", fnv1a(org_id.as_bytes()))
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A label value: at most 63 characters of `[A-Za-z0-9._-]`, beginning and ending
/// with a letter or digit (others become `-`, the ends are trimmed).
fn label_value(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// The objects, in the order they are applied.
pub fn build_namespace(input: &NamespaceInput<'_>) -> Vec<KubeObject> {
    let name = namespace_name(input.org_id);
    let tier = input.entitlement.tier;
    let mut labels = BTreeMap::new();
    labels.insert(
        "app.kubernetes.io/managed-by".to_owned(),
        "compliance".to_owned(),
    );
    labels.insert(
        "compliance.dev/org-id".to_owned(),
        label_value(input.org_id),
    );
    labels.insert(
        "compliance.dev/org-name".to_owned(),
        label_value(input.org_name),
    );
    labels.insert("compliance.dev/tier".to_owned(), tier.name().to_owned());
    let meta = |object: &str| Metadata {
        name: object.to_owned(),
        namespace: Some(name.clone()),
        labels: labels.clone(),
    };
    let compute = build_compute(tier);
    let mut hard = serde_json::Map::new();
    hard.insert("pods".into(), json!(compute.pods.to_string()));
    hard.insert("requests.cpu".into(), json!(compute.cpu.to_string()));
    hard.insert("limits.cpu".into(), json!(compute.cpu.to_string()));
    hard.insert(
        "requests.memory".into(),
        json!(format!("{}Gi", compute.memory_gib)),
    );
    hard.insert(
        "limits.memory".into(),
        json!(format!("{}Gi", compute.memory_gib)),
    );
    if let Limit::Finite(gb) = input.entitlement.limit(Dimension::Storage) {
        hard.insert("requests.storage".into(), json!(format!("{gb}Gi")));
    }
    hard.insert("services.loadbalancers".into(), json!("0"));
    hard.insert("services.nodeports".into(), json!("0"));
    let container = json!({
        "cpu": format!("{}m", compute.container_cpu_millis),
        "memory": format!("{}Mi", compute.container_memory_mib),
    });
    let egress = match input.registry {
        Some(registry) => registry_egress(registry),
        None => Vec::new(),
    };
    let mut namespace_labels = labels.clone();
    // Builds run under the restricted Pod Security Standard.
    namespace_labels.insert(
        "pod-security.kubernetes.io/enforce".to_owned(),
        "restricted".to_owned(),
    );
    vec![
        KubeObject {
            api_version: "v1",
            kind: "Namespace",
            metadata: Metadata {
                name: name.clone(),
                namespace: None,
                labels: namespace_labels,
            },
            spec: None,
            automount_service_account_token: None,
        },
        KubeObject {
            api_version: "v1",
            kind: "ResourceQuota",
            metadata: meta("builds"),
            spec: Some(json!({ "hard": hard })),
            automount_service_account_token: None,
        },
        KubeObject {
            api_version: "v1",
            kind: "LimitRange",
            metadata: meta("builds"),
            spec: Some(json!({"limits": [{
                "type": "Container",
                "default": container,
                "defaultRequest": {"cpu": "250m", "memory": "256Mi"},
                "max": container,
            }]})),
            automount_service_account_token: None,
        },
        KubeObject {
            api_version: "networking.k8s.io/v1",
            kind: "NetworkPolicy",
            metadata: meta("default-deny-except-registry"),
            spec: Some(json!({
                "podSelector": {},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [],
                "egress": egress,
            })),
            automount_service_account_token: None,
        },
        KubeObject {
            api_version: "v1",
            kind: "ServiceAccount",
            metadata: meta("builder"),
            spec: None,
            automount_service_account_token: Some(false),
        },
    ]
}

/// Egress to the registry only: its address when it is an IP address; when it is a
/// host name, its port at any address and name resolution (port 53), since a
/// network policy cannot name a host.
fn registry_egress(registry: RegistryAddress<'_>) -> Vec<Value> {
    let port = json!([{"protocol": "TCP", "port": registry.port}]);
    match registry.host.parse::<std::net::IpAddr>() {
        Ok(ip) => {
            let cidr = match ip {
                std::net::IpAddr::V4(_) => format!("{ip}/32"),
                std::net::IpAddr::V6(_) => format!("{ip}/128"),
            };
            vec![json!({"to": [{"ipBlock": {"cidr": cidr}}], "ports": port})]
        }
        Err(_) => vec![
            json!({"ports": port}),
            json!({"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{effective, Account, Catalog};

    fn objects(tier: Tier, id: &str, registry: Option<RegistryAddress<'_>>) -> Vec<KubeObject> {
        let entitlement = effective(&Catalog::default(), &Account::on(tier));
        build_namespace(&NamespaceInput {
            org_id: id,
            org_name: "Acme Corp / builds",
            entitlement: &entitlement,
            registry,
        })
    }

    #[test]
    fn the_same_inputs_give_the_same_objects() {
        let a = objects(Tier::Team, "abc", None);
        let b = objects(Tier::Team, "abc", None);
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        let kinds: Vec<_> = a.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "ResourceQuota",
                "LimitRange",
                "NetworkPolicy",
                "ServiceAccount"
            ]
        );
    }

    #[test]
    fn the_quota_follows_the_tier() {
        let dev = objects(Tier::Developer, "abc", None);
        let ent = objects(Tier::Enterprise, "abc", None);
        let hard = |o: &[KubeObject]| o[1].spec.as_ref().unwrap()["hard"].clone();
        assert_eq!(hard(&dev)["pods"], "2");
        assert_eq!(hard(&ent)["pods"], "25");
        assert_eq!(hard(&dev)["limits.memory"], "4Gi");
        assert_eq!(hard(&dev)["services.loadbalancers"], "0");
        assert_eq!(ent[0].metadata.labels["compliance.dev/tier"], "enterprise");
    }

    #[test]
    fn names_are_valid_whatever_the_id() {
        assert_eq!(namespace_name("abc-1"), "org-abc-1");
        for id in ["ABC", "a_b", "", "x-", &"a".repeat(60), "ünï"] {
            let name = namespace_name(id);
            assert_eq!(name.len(), 20, "{id}");
            assert!(name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
        }
        assert_ne!(namespace_name("ABC"), namespace_name("ABD"));
        assert_eq!(label_value("Acme Corp / builds"), "Acme-Corp---builds");
        assert_eq!(label_value("--x--"), "x");
        assert!(label_value(&"é".repeat(100)).is_empty());
    }

    #[test]
    fn egress_reaches_the_registry_only() {
        let by_ip = objects(
            Tier::Pro,
            "abc",
            Some(RegistryAddress {
                host: "10.1.2.3",
                port: 5000,
            }),
        );
        let spec = by_ip[3].spec.as_ref().unwrap();
        assert_eq!(spec["ingress"], json!([]));
        assert_eq!(spec["egress"][0]["to"][0]["ipBlock"]["cidr"], "10.1.2.3/32");
        assert_eq!(spec["egress"][0]["ports"][0]["port"], 5000);
        assert_eq!(spec["egress"].as_array().unwrap().len(), 1);
        let none = objects(Tier::Pro, "abc", None);
        assert_eq!(none[3].spec.as_ref().unwrap()["egress"], json!([]));
        let by_name = objects(
            Tier::Pro,
            "abc",
            Some(RegistryAddress {
                host: "registry.example",
                port: 443,
            }),
        );
        assert_eq!(
            by_name[3].spec.as_ref().unwrap()["egress"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }
}
