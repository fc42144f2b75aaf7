//! Alerts: how often rules are evaluated, where PagerDuty's events go, how many
//! destination tests an organization may make a minute.

use std::time::Duration;

use super::Reader;

/// PagerDuty's Events API v2.
pub const PAGERDUTY_EVENTS_URL: &str = "https://events.pagerduty.com/v2/enqueue";

/// The alert evaluation (`ALERT_*`, `PAGERDUTY_EVENTS_URL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertSettings {
    /// `ALERT_EVALUATION_INTERVAL_SECONDS` (60, at least 1): how often a rule is
    /// evaluated, and the least `for` a rule may have above zero.
    pub interval: Duration,
    /// `PAGERDUTY_EVENTS_URL` (PagerDuty's): where PagerDuty events are posted.
    pub pagerduty_url: String,
    /// `ALERT_TESTS_PER_MINUTE` (10): destination tests per organization and minute.
    pub tests_per_minute: u32,
}

/// Reads the section.
pub(super) fn alert_settings(r: &mut Reader<'_>) -> AlertSettings {
    AlertSettings {
        interval: Duration::from_secs(r.positive("ALERT_EVALUATION_INTERVAL_SECONDS", 60)),
        pagerduty_url: r.string("PAGERDUTY_EVENTS_URL", PAGERDUTY_EVENTS_URL),
        tests_per_minute: u32::try_from(r.positive("ALERT_TESTS_PER_MINUTE", 10))
            .unwrap_or(u32::MAX),
    }
}
