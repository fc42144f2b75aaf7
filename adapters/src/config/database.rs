//! The databases beside `DATABASE_URL`: the database itself behind a pooler, and a
//! streaming standby the reports read.

use std::time::Duration;

use super::{Reader, Secret};

/// Where the reports read (`REPORTING_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportingSettings {
    /// `REPORTING_DATABASE_URL`: a streaming standby of the primary (`postgres://`,
    /// one host or several); unset, the reports read the primary.
    pub url: Option<Secret>,
    /// `REPORTING_MAX_LAG_SECONDS` (30): how far behind the primary the standby may
    /// be; a report that would read older data reads the primary (and says so).
    pub max_lag: Duration,
}

/// `DATABASE_DIRECT_URL`: the database itself when `database_url` names a pooler in
/// transaction mode (one host each, PostgreSQL only).
pub(super) fn direct_url(r: &mut Reader<'_>, database_url: &str) -> Option<Secret> {
    let url = r
        .raw("DATABASE_DIRECT_URL")
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(str::to_owned)?;
    let postgres = |url: &str| url.starts_with("postgres://") || url.starts_with("postgresql://");
    if !postgres(&url) || !postgres(database_url) {
        r.fail(
            "DATABASE_DIRECT_URL",
            "expected a postgres:// URL, beside a DATABASE_URL naming a pooler in front of PostgreSQL".to_owned(),
        );
    } else if [url.as_str(), database_url]
        .into_iter()
        .any(|url| split_hosts(url).is_ok_and(|hosts| hosts.len() > 1))
    {
        r.fail(
            "DATABASE_DIRECT_URL",
            "with a pooler, DATABASE_URL and DATABASE_DIRECT_URL name one host each".to_owned(),
        );
    }
    Some(Secret::new(url))
}

/// Reads the section.
pub(super) fn reporting_settings(r: &mut Reader<'_>) -> ReportingSettings {
    let url = r
        .raw("REPORTING_DATABASE_URL")
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(str::to_owned);
    if let Some(url) = &url {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            r.fail(
                "REPORTING_DATABASE_URL",
                "expected a postgres:// URL of a streaming standby".to_owned(),
            );
        }
    }
    ReportingSettings {
        url: url.map(Secret::new),
        max_lag: Duration::from_secs(r.parse(
            "REPORTING_MAX_LAG_SECONDS",
            30,
            "a number of seconds",
        )),
    }
}

/// The hosts of a PostgreSQL connection URL, each as a URL of its own (a URL without
/// a host, such as a socket's, is one). A parameter libpq reads and this server
/// decides itself (`target_session_attrs`: the server always needs the primary) is
/// removed.
pub fn split_hosts(url: &str) -> Result<Vec<String>, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| "the database URL has no scheme".to_owned())?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (user, hosts) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    let (path, query) = match tail.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (tail, None),
    };
    let kept: Vec<&str> = query
        .into_iter()
        .flat_map(|query| query.split('&'))
        .filter(|pair| !pair.is_empty() && !pair.starts_with("target_session_attrs="))
        .collect();
    let query = if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    };
    let hosts: Vec<&str> = hosts.split(',').map(str::trim).collect();
    if hosts.len() > 1 && hosts.iter().any(|host| host.is_empty()) {
        return Err("the database URL names an empty host".to_owned());
    }
    Ok(hosts
        .into_iter()
        .map(|host| format!("{scheme}://{user}{host}{path}{query}"))
        .collect())
}
