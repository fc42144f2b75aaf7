//! The organization's build namespace as the build system would apply it
//! (`GET /api/admin/organizations/{id}/namespace`): `entitlements` makes the objects
//! from the organization's tier and limits and the registry's address; here they
//! become one YAML stream and its SHA-256. Audited `admin.org.namespace.render`.

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::services::context::Caller;
use crate::services::{entitlement, ServiceError, ServiceResult};
use crate::storage::Store;

/// The manifests of one organization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifests {
    /// The namespace's name.
    pub namespace: String,
    /// The objects as one YAML stream (`---` between them).
    pub yaml: String,
    /// The SHA-256 of `yaml`, hex.
    pub sha256: String,
}

/// The registry's host and port, from its URL (`http(s)://host[:port]`).
fn registry_address(url: &str) -> Option<(String, u16)> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?.trim_matches(['[', ']']).to_owned();
    Some((host, parsed.port_or_known_default()?))
}

/// Renders the manifests of `org_id` (a live organization) for `caller`, a
/// super-admin.
pub async fn render(
    store: &Store,
    config: &Config,
    caller: &Caller,
    org_id: &str,
) -> ServiceResult<Manifests> {
    let org = store
        .organization(org_id)
        .await?
        .ok_or(ServiceError::NotFound("organization".into()))?;
    let root = entitlement::root_of(store, &org).await?;
    let current = entitlement::current(store, config, &root).await?;
    let held = entitlement::entitlement(config, &current);
    let registry = config
        .registry
        .as_ref()
        .and_then(|r| registry_address(&r.url));
    let objects = entitlements::build_namespace(&entitlements::NamespaceInput {
        org_id: &org.id,
        org_name: &org.name,
        entitlement: &held,
        registry: registry
            .as_ref()
            .map(|(host, port)| entitlements::RegistryAddress { host, port: *port }),
    });
    let mut yaml = String::new();
    for object in &objects {
        let text = serde_yaml_ng::to_string(object)
            .map_err(|e| ServiceError::Broken(format!("a manifest did not serialize: {e}")))?;
        yaml.push_str("---\n");
        yaml.push_str(&text);
    }
    let sha256 = hex::encode(Sha256::digest(yaml.as_bytes()));
    let namespace = entitlements::namespace_name(&org.id);
    let details = json!({"namespace": namespace, "sha256": sha256, "tier": held.tier.name()});
    let audit = super::org_events(
        store,
        caller,
        "admin.org.namespace.render",
        &org.id,
        details,
    )
    .await?;
    crate::services::audit::record(store, &audit).await?;
    Ok(Manifests {
        namespace,
        yaml,
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::registry_address;

    #[test]
    fn the_registry_address_comes_from_its_url() {
        assert_eq!(
            registry_address("http://127.0.0.1:5000"),
            Some(("127.0.0.1".into(), 5000))
        );
        assert_eq!(
            registry_address("https://registry.example"),
            Some(("registry.example".into(), 443))
        );
        assert_eq!(
            registry_address("http://[::1]:5000/"),
            Some(("::1".into(), 5000))
        );
        assert_eq!(registry_address("not a url"), None);
    }
}
