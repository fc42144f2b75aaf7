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
        .any(|url| crate::storage::primary::split_hosts(url).is_ok_and(|hosts| hosts.len() > 1))
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
