//! Notification delivery's settings (document 1, Events items 2 and 3): the SMTP
//! relay, the webhook's address rule and proxy, retries and the worker's poll.

use std::time::Duration;

use super::{Reader, Secret};

/// Notification delivery (document 1, Events items 2 and 3).
#[derive(Debug, Clone)]
pub struct NotificationSettings {
    /// `SMTP_URL` (`smtp://host:25`, `smtps://user:pass@host:465`, or
    /// `smtp://host:587?tls=required`): the relay e-mail is handed to; without it,
    /// e-mail attempts are logged as skipped.
    pub smtp_url: Option<Secret>,
    /// `SMTP_FROM` (`compliance@localhost`): the sender.
    pub smtp_from: String,
    /// `WEBHOOK_ALLOW_PRIVATE` (false): let webhooks reach loopback, private and other
    /// non-public addresses (tests, private deployments).
    pub allow_private: bool,
    /// `WEBHOOK_PROXY_URL` (unset): the one proxy webhook deliveries go through.
    /// Unset, deliveries ignore `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` and
    /// connect straight to the address that was checked; set, the proxy decides
    /// where a delivery connects, and the server says so at start.
    pub webhook_proxy: Option<String>,
    /// `NOTIFY_RETRY_SECONDS` (30): the first wait before a retry; later waits are
    /// multiples of it, about a day in all.
    pub retry_base: Duration,
    /// `NOTIFY_MAX_ATTEMPTS` (9, at most 9): attempts of a delivery.
    pub max_attempts: u32,
    /// `NOTIFY_POLL_MS` (500): how often an idle delivery worker looks for work.
    pub poll: Duration,
}

/// Reads the notifications' section.
pub(super) fn notification_settings(r: &mut Reader<'_>) -> NotificationSettings {
    NotificationSettings {
        smtp_url: r.raw("SMTP_URL").filter(|v| !v.is_empty()).map(Secret::new),
        smtp_from: r.string("SMTP_FROM", "compliance@localhost"),
        allow_private: r.flag("WEBHOOK_ALLOW_PRIVATE"),
        webhook_proxy: match r.raw("WEBHOOK_PROXY_URL").filter(|v| !v.is_empty()) {
            Some(url) if reqwest::Proxy::all(url).is_ok() => Some(url.to_owned()),
            Some(url) => {
                r.fail("WEBHOOK_PROXY_URL", format!("`{url}` is not a proxy URL"));
                None
            }
            None => None,
        },
        retry_base: Duration::from_secs(r.parse("NOTIFY_RETRY_SECONDS", 30, "a number of seconds")),
        max_attempts: r
            .parse(
                "NOTIFY_MAX_ATTEMPTS",
                crate::notify::MAX_ATTEMPTS,
                "a number of attempts",
            )
            .clamp(1, crate::notify::MAX_ATTEMPTS),
        poll: Duration::from_millis(r.parse("NOTIFY_POLL_MS", 500, "milliseconds").max(10)),
    }
}
