//! The image registry's structured audit log events (document 3), as typed records
//! that serialize to the documented log line.

use serde::{Deserialize, Serialize};

/// Cross-mounted content of a tag copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mounted {
    /// Total manifests put.
    pub manifests: u64,
    /// Unique blob digests cross-mounted.
    pub blobs: u64,
}

/// `registry.tag.copy`: a cross-repository tag copy by a system admin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagCopy {
    /// Token subject of the system admin who copied.
    pub actor: String,
    /// `<repo>:<ref>`.
    pub source: String,
    /// `<repo>:<ref>`.
    pub target: String,
    /// Resolved manifest digest of the source.
    pub source_digest: String,
    /// Resolved manifest digest of the target.
    pub target_digest: String,
    /// What was mounted.
    pub mounted: Mounted,
}

/// `registry.tag.delete`: a manifest deleted by a system admin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagDelete {
    /// Token subject of the system admin.
    pub actor: String,
    /// Repository name.
    pub repo: String,
    /// Tag or digest passed.
    #[serde(rename = "ref")]
    pub reference: String,
    /// Resolved manifest digest actually deleted.
    pub digest: String,
}

/// The repository part of `<repo>:<ref>` (or `<repo>@<digest>`). A colon followed
/// by a path is a registry port, not a tag.
pub fn repository_of(reference: &str) -> &str {
    let without_digest = reference
        .split_once('@')
        .map_or(reference, |(repo, _)| repo);
    match without_digest.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => without_digest,
    }
}

impl TagCopy {
    /// True when the target repository starts with `system/`: the image becomes
    /// visible to every authenticated user.
    pub fn is_promotion_to_system(&self) -> bool {
        repository_of(&self.target).starts_with("system/")
    }
}

/// The labels of a log line beside its fields: the aggregator promotes
/// `service_name`, `eventCategory`, `event`, `actor` and `pluginName`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLabels<'a> {
    /// The emitting service.
    pub service_name: &'a str,
    /// The plugin the repository holds (its last path component), when known.
    pub plugin_name: Option<&'a str>,
    /// When it happened.
    pub timestamp: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Line<'a, T: Serialize> {
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<String>,
    #[serde(rename = "service_name")]
    service_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    plugin_name: Option<&'a str>,
    event_category: &'static str,
    event: &'static str,
    #[serde(flatten)]
    fields: &'a T,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_promotion_to_system: Option<bool>,
}

/// A registry audit event, as one JSON log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryEvent {
    /// A tag copy.
    TagCopy(TagCopy),
    /// A tag delete.
    TagDelete(TagDelete),
}

impl RegistryEvent {
    /// The `event` discriminator.
    pub fn name(&self) -> &'static str {
        match self {
            RegistryEvent::TagCopy(_) => "registry.tag.copy",
            RegistryEvent::TagDelete(_) => "registry.tag.delete",
        }
    }

    /// The log line: `eventCategory: "audit"`, the `event` discriminator and the
    /// documented fields; `service_name` as the aggregator labels it.
    ///
    /// ```
    /// use audit_chain::{Mounted, RegistryEvent, TagCopy};
    /// let copy = RegistryEvent::TagCopy(TagCopy {
    ///     actor: "admin-1".into(), source: "acme/app:1.0".into(), target: "system/app:1.0".into(),
    ///     source_digest: "sha256:aa".into(), target_digest: "sha256:aa".into(),
    ///     mounted: Mounted { manifests: 1, blobs: 3 },
    /// });
    /// let line: serde_json::Value = serde_json::from_str(&copy.to_log_line("image-registry")).unwrap();
    /// assert_eq!(line["event"], "registry.tag.copy");
    /// assert_eq!(line["eventCategory"], "audit");
    /// assert_eq!(line["isPromotionToSystem"], true);
    /// assert_eq!(line["mounted"]["blobs"], 3);
    /// ```
    pub fn to_log_line(&self, service_name: &str) -> String {
        self.to_labelled_line(LogLabels {
            service_name,
            plugin_name: None,
            timestamp: None,
        })
    }

    /// [`to_log_line`](Self::to_log_line) with every label: the `pluginName` and an
    /// RFC 3339 `timestamp` (milliseconds, UTC).
    ///
    /// ```
    /// use audit_chain::{LogLabels, RegistryEvent, TagDelete};
    /// use chrono::TimeZone;
    /// let delete = RegistryEvent::TagDelete(TagDelete {
    ///     actor: "admin-1".into(), repo: "org-a/lint".into(), reference: "1.0".into(),
    ///     digest: "sha256:aa".into(),
    /// });
    /// let at = chrono::Utc.with_ymd_and_hms(2026, 11, 26, 12, 0, 0).unwrap();
    /// let labels = LogLabels { service_name: "compliance", plugin_name: Some("lint"), timestamp: Some(at) };
    /// let line: serde_json::Value = serde_json::from_str(&delete.to_labelled_line(labels)).unwrap();
    /// assert_eq!(line["pluginName"], "lint");
    /// assert_eq!(line["timestamp"], "2026-11-26T12:00:00.000Z");
    /// assert_eq!(line["ref"], "1.0");
    /// ```
    pub fn to_labelled_line(&self, labels: LogLabels<'_>) -> String {
        let LogLabels {
            service_name,
            plugin_name,
            timestamp,
        } = labels;
        let timestamp = timestamp.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        let result = match self {
            RegistryEvent::TagCopy(copy) => serde_json::to_string(&Line {
                timestamp,
                plugin_name,
                service_name,
                event_category: "audit",
                event: self.name(),
                fields: copy,
                is_promotion_to_system: Some(copy.is_promotion_to_system()),
            }),
            RegistryEvent::TagDelete(delete) => serde_json::to_string(&Line {
                timestamp,
                plugin_name,
                service_name,
                event_category: "audit",
                event: self.name(),
                fields: delete,
                is_promotion_to_system: None,
            }),
        };
        result.unwrap_or_default()
    }
}
