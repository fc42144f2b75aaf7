//! Plugin image builds: the command, its time limit, attempts and the worker's poll.

use std::time::Duration;

use super::Reader;

/// Plugin image builds (`PLUGIN_BUILD_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildSettings {
    /// `PLUGIN_BUILD_COMMAND`: run by `sh -c` in the unpacked plugin's directory,
    /// with `PLUGIN_DIR`, `PLUGIN_IMAGE`, `PLUGIN_NAME`, `PLUGIN_VERSION`,
    /// `PLUGIN_BUILD_ID` and `PLUGIN_BUILD_QUEUE` in its environment (a `docker build`
    /// or `buildah` wrapper in production). Unset: no build runs and jobs wait queued.
    pub command: Option<String>,
    /// `PLUGIN_BUILD_TIMEOUT_SECONDS` (600): one attempt's limit; past it the builder
    /// is killed and the attempt times out.
    pub timeout: Duration,
    /// `PLUGIN_BUILD_ATTEMPTS` (3): attempts in the tier queue before the dead letter
    /// queue.
    pub tier_attempts: u32,
    /// `PLUGIN_BUILD_DLQ_ATTEMPTS` (2): attempts in the dead letter queue before the
    /// build ends failed or timed out.
    pub dlq_attempts: u32,
    /// `PLUGIN_BUILD_RETRY_SECONDS` (30): the wait before a retry, doubled after each
    /// failed attempt in the same queue.
    pub retry_delay: Duration,
    /// `PLUGIN_BUILD_POLL_MS` (1000): how often the worker looks for a due job.
    pub poll: Duration,
}

/// Reads the section.
pub(super) fn build_settings(r: &mut Reader<'_>) -> BuildSettings {
    BuildSettings {
        command: r
            .raw("PLUGIN_BUILD_COMMAND")
            .filter(|v| !v.is_empty())
            .map(str::to_owned),
        timeout: Duration::from_secs(r.parse(
            "PLUGIN_BUILD_TIMEOUT_SECONDS",
            600,
            "a number of seconds",
        )),
        tier_attempts: r
            .parse("PLUGIN_BUILD_ATTEMPTS", 3u32, "a number of attempts")
            .max(1),
        dlq_attempts: r
            .parse("PLUGIN_BUILD_DLQ_ATTEMPTS", 2u32, "a number of attempts")
            .max(1),
        retry_delay: Duration::from_secs(r.parse(
            "PLUGIN_BUILD_RETRY_SECONDS",
            30,
            "a number of seconds",
        )),
        poll: Duration::from_millis(
            r.parse("PLUGIN_BUILD_POLL_MS", 1000, "milliseconds")
                .max(10),
        ),
    }
}
