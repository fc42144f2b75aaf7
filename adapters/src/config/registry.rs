//! The image registry (`REGISTRY_*`).

use super::{Reader, Secret};

/// The registry's address and credentials (`REGISTRY_URL`, `REGISTRY_USERNAME`,
/// `REGISTRY_PASSWORD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrySettings {
    /// The registry's base URL (`http(s)://host[:port]`).
    pub url: String,
    /// The user name, for basic authentication or the token endpoint.
    pub username: Option<String>,
    /// The password.
    pub password: Option<Secret>,
}

/// Reads the section; `None` when `REGISTRY_URL` is unset.
pub(super) fn registry_settings(r: &mut Reader<'_>) -> Option<RegistrySettings> {
    let registry = r
        .raw("REGISTRY_URL")
        .filter(|v| !v.is_empty())
        .map(|url| RegistrySettings {
            url: url.to_owned(),
            username: r
                .raw("REGISTRY_USERNAME")
                .filter(|v| !v.is_empty())
                .map(str::to_owned),
            password: r.raw("REGISTRY_PASSWORD").map(Secret::new),
        });
    if let Some(url) = registry.as_ref().map(|r| r.url.clone()) {
        let parsed = reqwest::Url::parse(&url);
        let ok = parsed
            .as_ref()
            .is_ok_and(|u| ["http", "https"].contains(&u.scheme()) && u.host_str().is_some());
        if !ok {
            r.fail(
                "REGISTRY_URL",
                format!("`{url}` is not an http(s) address with a host"),
            );
        }
    }
    registry
}
