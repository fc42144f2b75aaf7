//! Delivering a notification: one attempt on its channel (the inbox, e-mail through
//! the SMTP relay, a signed webhook to a public address), its record in the
//! notification log with the delivery's next state, and the digests of held
//! deliveries. A receiver sees the notification's id on every attempt (the webhook
//! body's `id`, the `webhook-id` header, the e-mail's `Message-ID`), so a retry is
//! never a second notification.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::notifications::*;
use super::{keys, ServiceError, ServiceResult};
use crate::config::Config;
use crate::keys::Keyring;
use crate::metrics::Metrics;
use crate::notify::{self, Channel};
use crate::storage::{unit_of_work, Attempt, ClaimedDelivery, HeldWindow, NewNotification, Store};
/// The JSON a webhook receives (the same bytes on every attempt).
pub fn webhook_body(claimed: &ClaimedDelivery) -> Vec<u8> {
    json!({
        "id": claimed.notification_id,
        "type": claimed.kind,
        "orgId": claimed.org_id,
        "createdAt": claimed.created_at,
        "title": title(&claimed.kind, &claimed.payload),
        "data": claimed.payload,
    })
    .to_string()
    .into_bytes()
}

/// Why a webhook URL is refused: it does not parse, or names a host that is not
/// public (unless `WEBHOOK_ALLOW_PRIVATE`).
pub(crate) async fn resolve_webhook(
    url: &str,
    allow_private: bool,
) -> Result<(reqwest::Url, SocketAddr), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    if !["http", "https"].contains(&parsed.scheme()) {
        return Err("must be an http(s) URL".to_owned());
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| "has no host".to_owned())?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| "has no port".to_owned())?;
    let addresses: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::lookup_host((host.as_str(), port)),
        )
        .await
        .map_err(|_| format!("`{host}` did not resolve in time"))?
        .map_err(|e| format!("`{host}` does not resolve: {e}"))?
        .collect(),
    };
    let first = addresses
        .first()
        .copied()
        .ok_or_else(|| format!("`{host}` resolves to no address"))?;
    if !allow_private {
        if let Some(private) = addresses.iter().find(|a| !notify::is_public(a.ip())) {
            return Err(format!(
                "`{host}` resolves to {}, which is not a public address",
                private.ip()
            ));
        }
    }
    Ok((parsed, first))
}

/// Checks a webhook URL as a preference saves it (400 naming `webhookUrl`).
pub async fn check_webhook_url(config: &Config, url: &str) -> ServiceResult<()> {
    resolve_webhook(url, config.notifications.allow_private)
        .await
        .map(|_| ())
        .map_err(|why| ServiceError::invalid("webhookUrl", why))
}

/// How one attempt went, before it is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Delivered; the receiver's status when it has one.
    Sent(Option<u16>),
    /// Nothing to send it with (no SMTP relay, no recipient, no webhook).
    Skipped(String),
    /// Failed; worth another attempt.
    Failed(Option<u16>, String),
    /// Failed for good (a refused address, a secret that cannot be opened).
    Refused(String),
    /// The receiver refused it for good (a 4xx other than 408 and 429): not retried.
    Rejected(u16, String),
    /// The receiver answered 410 Gone: the webhook is turned off.
    Gone,
    /// Not attempted: the organization's key cannot open the signing secret now
    /// (nothing is sent unsigned). The delivery waits in its queue, and goes out
    /// once the key works again.
    Waiting(String),
}

/// Makes one attempt of a claimed delivery.
pub async fn attempt(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    claimed: &ClaimedDelivery,
) -> ServiceResult<Outcome> {
    if claimed.channel.starts_with(super::alerts::ALERT_CHANNEL) {
        return super::alerts::deliver(store, config, keyring, claimed).await;
    }
    match Channel::parse(&claimed.channel) {
        Some(Channel::Inbox) => {
            let kind = if claimed.kind == "digest" {
                "digest"
            } else {
                "notification"
            };
            let body = serde_json::to_string_pretty(&claimed.payload).unwrap_or_default();
            store
                .post_message(
                    &claimed.org_id,
                    (kind, &title(&claimed.kind, &claimed.payload), &body),
                    Some(&claimed.notification_id),
                    SYSTEM,
                    Utc::now(),
                )
                .await?;
            Ok(Outcome::Sent(None))
        }
        Some(Channel::Email) => email(store, config, claimed).await,
        Some(Channel::Webhook) => webhook(store, config, keyring, claimed).await,
        None => Ok(Outcome::Refused(format!(
            "unknown channel `{}`",
            claimed.channel
        ))),
    }
}

async fn email(
    store: &Store,
    config: &Config,
    claimed: &ClaimedDelivery,
) -> ServiceResult<Outcome> {
    let Some(url) = &config.notifications.smtp_url else {
        return Ok(Outcome::Skipped("SMTP_URL is not set".to_owned()));
    };
    let preference = store.notification_preference(&claimed.org_id).await?;
    let recipients = match &preference.target_users {
        Some(users) => {
            let (addresses, ids): (Vec<String>, Vec<String>) =
                users.iter().cloned().partition(|u| u.contains('@'));
            let mut all = addresses;
            all.extend(store.member_emails(&claimed.org_id, &ids).await?);
            all
        }
        None => store.admin_emails(&claimed.org_id).await?,
    };
    if recipients.is_empty() {
        return Ok(Outcome::Skipped(
            "no recipient has an e-mail address".to_owned(),
        ));
    }
    let text = format!(
        "{}\n\nNotification {}\n\n{}\n",
        title(&claimed.kind, &claimed.payload),
        claimed.notification_id,
        serde_json::to_string_pretty(&claimed.payload).unwrap_or_default()
    );
    Ok(send_mail(
        config,
        url.expose(),
        &claimed.notification_id,
        &recipients,
        (&title(&claimed.kind, &claimed.payload), &text),
    )
    .await)
}

/// Sends one plain-text mail through the SMTP relay at `url`, from `SMTP_FROM`, with
/// `id` in its `Message-ID` (the same on every attempt); recipients that are not
/// addresses are left out.
pub(crate) async fn send_mail(
    config: &Config,
    url: &str,
    id: &str,
    recipients: &[String],
    (subject, text): (&str, &str),
) -> Outcome {
    use lettre::message::header::ContentType;
    use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
    let from = match config.notifications.smtp_from.parse() {
        Ok(from) => from,
        Err(e) => return Outcome::Refused(format!("SMTP_FROM: {e}")),
    };
    let mut builder = Message::builder()
        .from(from)
        .subject(subject)
        .message_id(Some(format!("<{id}@compliance>")))
        .header(ContentType::TEXT_PLAIN);
    let mut valid = 0;
    for recipient in recipients {
        if let Ok(mailbox) = recipient.parse() {
            builder = builder.to(mailbox);
            valid += 1;
        }
    }
    if valid == 0 {
        return Outcome::Skipped("no recipient address is valid".to_owned());
    }
    let message = match builder.body(text.to_owned()) {
        Ok(m) => m,
        Err(e) => return Outcome::Refused(format!("the message cannot be built: {e}")),
    };
    let transport = match AsyncSmtpTransport::<Tokio1Executor>::from_url(url) {
        Ok(t) => t.timeout(Some(WEBHOOK_TIMEOUT)).build(),
        Err(e) => return Outcome::Refused(format!("SMTP_URL: {e}")),
    };
    match transport.send(message).await {
        Ok(response) => Outcome::Sent(Some(response.code().into())),
        Err(e) if e.is_permanent() => Outcome::Failed(None, format!("the relay refused it: {e}")),
        Err(e) => Outcome::Failed(None, format!("the relay failed: {e}")),
    }
}

async fn webhook(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    claimed: &ClaimedDelivery,
) -> ServiceResult<Outcome> {
    let preference = store.notification_preference(&claimed.org_id).await?;
    if preference.webhook_url.is_some() && preference.webhook_disabled_at.is_some() {
        return Ok(Outcome::Skipped(
            "the webhook answered 410 Gone; save its URL again to turn it on".to_owned(),
        ));
    }
    let body = webhook_body(claimed);
    let (outcome, _) = post_webhook(
        store,
        config,
        keyring,
        (&claimed.org_id, &preference),
        &claimed.notification_id,
        body,
        false,
    )
    .await?;
    Ok(outcome)
}

/// The most of a receiver's answer a test shows.
pub const ANSWER_SHOWN: usize = 1024;

/// Posts `body` to the organization's webhook as delivery `id` (signed with its
/// secret when it has one), to the address that was checked; the outcome, and when
/// `read_answer` the first [`ANSWER_SHOWN`] bytes of the receiver's answer as text.
pub(crate) async fn post_webhook(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    (org_id, preference): (&str, &crate::storage::NotificationPreference),
    id: &str,
    body: Vec<u8>,
    read_answer: bool,
) -> ServiceResult<(Outcome, String)> {
    let Some(url) = preference.webhook_url.as_deref() else {
        return Ok((Outcome::Skipped("no webhookUrl".to_owned()), String::new()));
    };
    let (parsed, address) = match resolve_webhook(url, config.notifications.allow_private).await {
        Ok(resolved) => resolved,
        Err(why) => return Ok((Outcome::Refused(why), String::new())),
    };
    let secret = match preference.webhook_secret.as_deref() {
        None => None,
        Some(stored) => {
            match keys::open(store, config, keyring, keys::webhook_secret(org_id), stored).await {
                Ok(secret) => Some(secret),
                Err(ServiceError::KeyUnavailable(why)) => {
                    return Ok((Outcome::Waiting(why), String::new()))
                }
                Err(error) => return Ok((Outcome::Refused(error.to_string()), String::new())),
            }
        }
    };
    let timestamp = Utc::now().timestamp();
    // The connection goes to the address that was checked: no second lookup.
    let host = parsed.host_str().unwrap_or_default().to_owned();
    // The proxy variables of the environment are ignored: with one, the proxy would
    // decide where the delivery connects, not the address check. Only a proxy
    // configured for webhooks (`WEBHOOK_PROXY_URL`, announced at start) is used.
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(WEBHOOK_TIMEOUT)
        .resolve(&host, address)
        .no_proxy();
    if let Some(proxy) = &config.notifications.webhook_proxy {
        let proxy = reqwest::Proxy::all(proxy)
            .map_err(|e| ServiceError::Broken(format!("WEBHOOK_PROXY_URL: {e}")))?;
        builder = builder.proxy(proxy);
    }
    let client = builder
        .build()
        .map_err(|e| ServiceError::Broken(format!("the webhook client: {e}")))?;
    let mut request = client
        .post(parsed)
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string());
    if let Some(secret) = &secret {
        request = request
            .header("x-svc-signature", notify::svc_signature(secret, &body))
            .header(
                "webhook-signature",
                notify::standard_signature(secret, id, timestamp, &body),
            );
    }
    match request.body(body).send().await {
        Ok(mut response) => {
            let status = response.status().as_u16();
            let mut answer = Vec::new();
            // At most ANSWER_SHOWN bytes are read, chunk by chunk.
            while read_answer && answer.len() < ANSWER_SHOWN {
                match response.chunk().await {
                    Ok(Some(chunk)) => answer.extend_from_slice(&chunk),
                    Ok(None) | Err(_) => break,
                }
            }
            answer.truncate(ANSWER_SHOWN);
            let answer = String::from_utf8_lossy(&answer).into_owned();
            let outcome = match status {
                200..=299 => Outcome::Sent(Some(status)),
                410 => Outcome::Gone,
                _ => Outcome::Failed(Some(status), format!("the receiver answered {status}")),
            };
            Ok((outcome, answer))
        }
        Err(e) if e.is_timeout() => Ok((
            Outcome::Failed(None, "no answer within 10 s".to_owned()),
            String::new(),
        )),
        Err(e) => Ok((
            Outcome::Failed(None, format!("the request failed: {e}")),
            String::new(),
        )),
    }
}

/// Records an attempt's outcome: the log row and the delivery's next state (retried
/// with backoff, failed after the last attempt, the webhook turned off by a 410).
pub async fn record(
    store: &Store,
    config: &Config,
    metrics: &Metrics,
    claimed: &ClaimedDelivery,
    outcome: &Outcome,
) -> ServiceResult<bool> {
    let now = Utc::now();
    let base = config.notifications.retry_base;
    if let Outcome::Waiting(why) = outcome {
        // Looked at again after a retry's wait, or as soon as the key recovers.
        let again = now + chrono::Duration::from_std(base).unwrap_or(chrono::Duration::seconds(30));
        tracing::info!(delivery = %claimed.id, %why, "a webhook delivery waits for its organization's key");
        return Ok(store.defer_delivery(claimed, again, now).await?);
    }
    let next = notify::retry_after(claimed.attempts + 1, base)
        .filter(|_| claimed.attempts + 1 < config.notifications.max_attempts);
    let at =
        |wait: Duration| now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX);
    let attempt = match outcome {
        Outcome::Sent(code) => Attempt {
            status: "sent",
            delivery_status: "sent",
            response_status: *code,
            error: None,
            run_after: now,
        },
        Outcome::Skipped(why) => Attempt {
            status: "skipped",
            delivery_status: "skipped",
            response_status: None,
            error: Some(why),
            run_after: now,
        },
        Outcome::Refused(why) => Attempt {
            status: "failed",
            delivery_status: "failed",
            response_status: None,
            error: Some(why),
            run_after: now,
        },
        // Answered above: no attempt is recorded.
        Outcome::Waiting(why) => Attempt {
            status: "retrying",
            delivery_status: "pending",
            response_status: None,
            error: Some(why),
            run_after: now,
        },
        Outcome::Rejected(code, why) => Attempt {
            status: "failed",
            delivery_status: "failed",
            response_status: Some(*code),
            error: Some(why),
            run_after: now,
        },
        Outcome::Gone => Attempt {
            status: "disabled",
            delivery_status: "disabled",
            response_status: Some(410),
            error: Some("the receiver answered 410 Gone: the webhook is turned off"),
            run_after: now,
        },
        Outcome::Failed(code, why) => match next {
            Some(wait) => Attempt {
                status: "retrying",
                delivery_status: "pending",
                response_status: *code,
                error: Some(why),
                run_after: at(wait),
            },
            None => Attempt {
                status: "failed",
                delivery_status: "failed",
                response_status: *code,
                error: Some(why),
                run_after: now,
            },
        },
    };
    if *outcome == Outcome::Gone {
        store.disable_webhook(&claimed.org_id, now).await?;
        // The kept preferences follow on every replica.
        store.facts_changed();
    }
    let held = unit_of_work!(store, |tx| {
        Ok(tx.finish_delivery(claimed, &attempt, now).await?)
    })?;
    if held {
        metrics.notification(attempt.status);
    }
    Ok(held)
}

/// Makes the digests of every window that has ended (a minute's grace, for checks
/// committed at its very end); how many were made by this call.
pub async fn send_digests(store: &Store, now: DateTime<Utc>) -> ServiceResult<usize> {
    let mut made = 0;
    for window in store.held_windows().await? {
        let Some(ends) = notify::window_end(&window.window) else {
            tracing::error!(window = %window.window, "a held delivery's window does not read");
            continue;
        };
        if ends + chrono::Duration::minutes(1) > now {
            continue;
        }
        // Decided at `now`; written at the real time, when it is due for delivery.
        if digest(store, &window, Utc::now()).await? {
            made += 1;
        }
    }
    Ok(made)
}

async fn digest(store: &Store, window: &HeldWindow, now: DateTime<Utc>) -> ServiceResult<bool> {
    let channel = window.channel.clone();
    let key = window.window.clone();
    let make = move |items: &[crate::storage::HeldItem], count: u64| NewNotification {
        kind: "digest".to_owned(),
        payload: json!({
            "window": key,
            "channel": channel,
            "count": count,
            "items": items.iter().map(|(kind, payload, at)| json!({
                "kind": kind, "title": title(kind, payload), "createdAt": at, "data": payload,
            })).collect::<Vec<_>>(),
        }),
        channels: vec![(channel.clone(), None)],
    };
    unit_of_work!(store, |tx| {
        Ok(tx.make_digest(window, MAX_DIGEST_ITEMS, &make, now).await?)
    })
}
