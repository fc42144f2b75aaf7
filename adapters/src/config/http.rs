//! This server's HTTP settings: its port, page and body limits, timeouts, the
//! step-up window and the drain.

use std::time::Duration;

use super::Reader;

/// HTTP settings of this server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    /// `COMPLIANCE_SERVICE_PORT` (3000).
    pub port: u16,
    /// `MAX_PAGE_LIMIT` (1000).
    pub max_page_limit: u32,
    /// `COMPLIANCE_REQUEST_TIMEOUT_MS` (30000).
    pub request_timeout: Duration,
    /// `COMPLIANCE_BODY_LIMIT_BYTES` (1 MiB).
    pub body_limit_bytes: usize,
    /// `STEP_UP_WINDOW_SECONDS` (300).
    pub step_up_window: Duration,
    /// `SHUTDOWN_GRACE_SECONDS` (30): after SIGTERM, how long requests in flight may
    /// take to finish before the process stops anyway.
    pub shutdown_grace: Duration,
}

/// Reads the section.
pub(super) fn http_settings(r: &mut Reader<'_>) -> HttpSettings {
    HttpSettings {
        port: r.parse("COMPLIANCE_SERVICE_PORT", 3000, "a port number"),
        max_page_limit: r
            .positive("MAX_PAGE_LIMIT", 1000)
            .try_into()
            .unwrap_or(u32::MAX),
        request_timeout: r.millis("COMPLIANCE_REQUEST_TIMEOUT_MS", 30_000),
        body_limit_bytes: r
            .positive("COMPLIANCE_BODY_LIMIT_BYTES", 1 << 20)
            .try_into()
            .unwrap_or(usize::MAX),
        step_up_window: Duration::from_secs(r.positive("STEP_UP_WINDOW_SECONDS", 300)),
        shutdown_grace: Duration::from_secs(r.parse(
            "SHUTDOWN_GRACE_SECONDS",
            30,
            "a number of seconds",
        )),
    }
}
