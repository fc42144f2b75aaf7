//! Re-evaluation after a rule changes: attempts, retry delay and the worker's poll.

use std::time::Duration;

use super::Reader;

/// The re-evaluation worker (`REEVALUATION_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReevaluationSettings {
    /// `REEVALUATION_MAX_ATTEMPTS` (5): attempts of an entity's events before they are
    /// dead (kept with their last error).
    pub max_attempts: u32,
    /// `REEVALUATION_RETRY_SECONDS` (2): the wait before a retry, doubled per attempt.
    pub retry_delay: Duration,
    /// `REEVALUATION_POLL_MS` (500): how often the worker looks for due events.
    pub poll: Duration,
}

/// Reads the section.
pub(super) fn reevaluation_settings(r: &mut Reader<'_>) -> ReevaluationSettings {
    ReevaluationSettings {
        max_attempts: r
            .parse("REEVALUATION_MAX_ATTEMPTS", 5u32, "a number of attempts")
            .max(1),
        retry_delay: Duration::from_secs(r.parse(
            "REEVALUATION_RETRY_SECONDS",
            2,
            "a number of seconds",
        )),
        poll: Duration::from_millis(r.parse("REEVALUATION_POLL_MS", 500, "milliseconds").max(10)),
    }
}
