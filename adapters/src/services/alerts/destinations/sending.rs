//! Sending one notice to one destination (`send`, over the kind's own wire), the
//! delivery worker's `deliver` and the test action.

use super::*;
use crate::config::Config;
use crate::keys::Keyring;
use crate::storage::Store;

fn subject(payload: &Value) -> String {
    let text = |k: &str| {
        payload
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let tag = match text("notice").as_str() {
        "resolved" => "RESOLVED",
        "repeat" => "FIRING (repeat)",
        _ => "FIRING",
    };
    let test = if payload.get("test").and_then(Value::as_bool) == Some(true) {
        "[TEST] "
    } else {
        ""
    };
    format!(
        "{test}[{tag}] {}: {} = {} ({} {})",
        text("ruleName"),
        text("metric"),
        payload.get("value").map_or("no data".to_owned(), |v| {
            if v.is_null() {
                "no data".to_owned()
            } else {
                v.to_string()
            }
        }),
        payload
            .get("comparison")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        payload
            .get("threshold")
            .map(Value::to_string)
            .unwrap_or_default(),
    )
}

fn outcome_of(status: u16) -> Outcome {
    match status {
        200..=299 => Outcome::Sent(Some(status)),
        408 | 429 | 500..=599 => {
            Outcome::Failed(Some(status), format!("the receiver answered {status}"))
        }
        _ => Outcome::Rejected(status, format!("the receiver answered {status}")),
    }
}

async fn post(
    config: &Config,
    url: &str,
    check_address: bool,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> Outcome {
    let (parsed, address) = if check_address {
        match resolve_webhook(url, config.notifications.allow_private).await {
            Ok(resolved) => (resolved.0, Some(resolved.1)),
            Err(why) => return Outcome::Refused(why),
        }
    } else {
        match reqwest::Url::parse(url) {
            Ok(u) => (u, None),
            Err(e) => return Outcome::Refused(format!("not a URL: {e}")),
        }
    };
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(WEBHOOK_TIMEOUT)
        .no_proxy();
    if let Some(address) = address {
        builder = builder.resolve(parsed.host_str().unwrap_or_default(), address);
    }
    if let Some(proxy) = &config.notifications.webhook_proxy {
        match reqwest::Proxy::all(proxy) {
            Ok(p) => builder = builder.proxy(p),
            Err(e) => return Outcome::Refused(format!("WEBHOOK_PROXY_URL: {e}")),
        }
    }
    let client = match builder.build() {
        Ok(c) => c,
        Err(e) => return Outcome::Refused(format!("the client: {e}")),
    };
    let mut request = client
        .post(parsed)
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    match request.body(body).send().await {
        Ok(response) => outcome_of(response.status().as_u16()),
        Err(e) if e.is_timeout() => Outcome::Failed(None, "no answer within 10 s".to_owned()),
        Err(e) => Outcome::Failed(None, format!("the request failed: {e}")),
    }
}

/// Sends one notice (`payload`: the notification's, `kind` its kind) to one
/// destination; `only` narrows an e-mail destination to one address (tests).
async fn send(
    config: &Config,
    (row, secret): (&DestinationRow, &Secret),
    (kind, payload): (&str, &Value),
    only: Option<&str>,
) -> ServiceResult<Outcome> {
    let (destination_kind, settings) = settings_of(row)?;
    let message_id = payload
        .get("messageId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let subject = subject(payload);
    Ok(match destination_kind {
        DestinationKind::Email => {
            let Some(url) = &config.notifications.smtp_url else {
                return Ok(Outcome::Skipped("SMTP_URL is not set".to_owned()));
            };
            let recipients: Vec<String> = match only {
                Some(a) => vec![a.to_owned()],
                None => settings.addresses.clone(),
            };
            let text = format!(
                "{subject}\n\n{}\n",
                serde_json::to_string_pretty(payload).unwrap_or_default()
            );
            send_mail(
                config,
                url.expose(),
                &message_id,
                &recipients,
                (&subject, &text),
            )
            .await
        }
        DestinationKind::Slack => {
            let Some(url) = &secret.url else {
                return Ok(Outcome::Refused("the destination has no URL".to_owned()));
            };
            let body = json!({"text": subject}).to_string().into_bytes();
            post(config, url, true, &[], body).await
        }
        DestinationKind::Webhook => {
            let (Some(url), Some(signing)) = (&secret.url, &secret.signing_secret) else {
                return Ok(Outcome::Refused(
                    "the destination has no URL or secret".to_owned(),
                ));
            };
            let body = json!({
                "id": message_id,
                "type": kind,
                "orgId": row.org_id,
                "createdAt": payload.get("at"),
                "title": subject,
                "data": payload,
            })
            .to_string()
            .into_bytes();
            let timestamp = Utc::now().timestamp();
            let signature =
                crate::notify::standard_signature(signing, &message_id, timestamp, &body);
            let headers = [
                ("webhook-id", message_id.clone()),
                ("webhook-timestamp", timestamp.to_string()),
                ("webhook-signature", signature),
            ];
            post(config, url, true, &headers, body).await
        }
        DestinationKind::Pagerduty => {
            let Some(key) = &secret.routing_key else {
                return Ok(Outcome::Refused(
                    "the destination has no routing key".to_owned(),
                ));
            };
            let dedup = payload
                .get("dedupKey")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let resolve = payload.get("notice").and_then(Value::as_str) == Some("resolved");
            let body = if resolve {
                json!({"routing_key": key, "event_action": "resolve", "dedup_key": dedup})
            } else {
                json!({
                    "routing_key": key,
                    "event_action": "trigger",
                    "dedup_key": dedup,
                    "client": "compliance",
                    "payload": {
                        "summary": subject.chars().take(1024).collect::<String>(),
                        "source": payload.get("orgId"),
                        "severity": payload.get("severity"),
                        "timestamp": payload.get("at"),
                        "component": payload.get("metric"),
                        "custom_details": payload,
                    }
                })
            };
            post(
                config,
                &config.alerts.pagerduty_url,
                false,
                &[],
                body.to_string().into_bytes(),
            )
            .await
        }
    })
}

/// The delivery worker's attempt of an alert delivery (channel
/// `alert:<destination>`).
pub async fn deliver(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    claimed: &ClaimedDelivery,
) -> ServiceResult<Outcome> {
    let id = claimed
        .channel
        .strip_prefix(ALERT_CHANNEL)
        .unwrap_or_default();
    let Some(row) = store.alert_destination(&claimed.org_id, id).await? else {
        return Ok(Outcome::Refused("the destination was deleted".to_owned()));
    };
    let secret = match open_secret(store, config, keyring, &row).await {
        Ok(s) => s,
        Err(ServiceError::KeyUnavailable(why)) => return Ok(Outcome::Waiting(why)),
        Err(error) => return Ok(Outcome::Refused(error.to_string())),
    };
    send(
        config,
        (&row, &secret),
        (&claimed.kind, &claimed.payload),
        None,
    )
    .await
}

/// One target of a test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestTarget {
    /// What was sent to (an address, a host, PagerDuty).
    pub target: String,
    /// `sent`, `failed` or `skipped`.
    pub status: String,
    /// The receiver's HTTP status (the relay's reply code for e-mail).
    pub http_status: Option<u16>,
    /// What went wrong.
    pub error: Option<String>,
    /// How long it took.
    pub latency_ms: u64,
}

/// What a test did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestResult {
    /// The destination's id (none for an unsaved one).
    pub destination_id: Option<String>,
    /// Each target's result.
    pub targets: Vec<TestTarget>,
}

fn target_of(target: String, outcome: Outcome, started: Instant) -> TestTarget {
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (status, http_status, error) = match outcome {
        Outcome::Sent(code) => ("sent", code, None),
        Outcome::Skipped(why) | Outcome::Waiting(why) => ("skipped", None, Some(why)),
        Outcome::Failed(code, why) => ("failed", code, Some(why)),
        Outcome::Rejected(code, why) => ("failed", Some(code), Some(why)),
        Outcome::Refused(why) => ("failed", None, Some(why)),
        Outcome::Gone => (
            "failed",
            Some(410),
            Some("the receiver answered 410".to_owned()),
        ),
    };
    TestTarget {
        target,
        status: status.to_owned(),
        http_status,
        error,
        latency_ms,
    }
}

/// Sends a message marked as a test to a saved destination, or to an unsaved one
/// (`body`), waiting at most 10 s; nothing is written to any alert history.
/// Audited `alert.destination.test`; at most `ALERT_TESTS_PER_MINUTE` per
/// organization and minute (429).
pub async fn test(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    target: Result<&str, &DestinationBody>,
    now: DateTime<Utc>,
) -> ServiceResult<TestResult> {
    let limit = state.config.alerts.tests_per_minute;
    let minute = now.format("%Y-%m-%dT%H:%M").to_string();
    let (row, secret, saved) = match target {
        Ok(id) => {
            let row = destination_row(&state.infra.store, org, id).await?;
            let secret = open_secret(
                &state.infra.store,
                &state.config,
                &state.outbound.keyring,
                &row,
            )
            .await?;
            (row, secret, true)
        }
        Err(body) => {
            let (name, settings, secret, _) = check_destination(&state.config, body, None).await?;
            let row = DestinationRow {
                id: new_id(),
                org_id: org.id.clone(),
                name,
                kind: body.kind.name().to_owned(),
                settings: to_json(&settings)?,
                secret: None,
                version: 0,
                created_at: now,
                updated_at: now,
            };
            (row, secret.unwrap_or_default(), false)
        }
    };
    if state
        .infra
        .store
        .count_alert_test(&org.id, &minute, limit)
        .await?
        .is_none()
    {
        return Err(ServiceError::RateLimited {
            what: "destination tests",
            limit: u64::from(limit),
            retry_after_seconds: 60 - u64::from(chrono::Timelike::second(&now)),
        });
    }
    let key = format!("test-{}", new_id());
    let payload = json!({
        "ruleId": null,
        "ruleName": "Test notification",
        "orgId": org.id,
        "notice": "firing",
        "state": "firing",
        "severity": "info",
        "labels": {},
        "metric": "test",
        "comparison": "gt",
        "threshold": 0,
        "value": 1,
        "dedupKey": key,
        "messageId": format!("{key}.1"),
        "at": now,
        "test": true,
    });
    let (kind, settings) = settings_of(&row)?;
    let run = async {
        let mut targets = Vec::new();
        match kind {
            DestinationKind::Email => {
                for address in &settings.addresses {
                    let started = Instant::now();
                    let outcome = send(
                        &state.config,
                        (&row, &secret),
                        ("alert.test", &payload),
                        Some(address),
                    )
                    .await?;
                    targets.push(target_of(address.clone(), outcome, started));
                }
            }
            DestinationKind::Pagerduty => {
                let started = Instant::now();
                let outcome = send(
                    &state.config,
                    (&row, &secret),
                    ("alert.test", &payload),
                    None,
                )
                .await?;
                let sent = matches!(outcome, Outcome::Sent(_));
                targets.push(target_of("pagerduty".to_owned(), outcome, started));
                if sent {
                    // The test's incident is resolved at once.
                    let mut resolve = payload.clone();
                    if let Some(o) = resolve.as_object_mut() {
                        o.insert("notice".to_owned(), json!("resolved"));
                    }
                    send(
                        &state.config,
                        (&row, &secret),
                        ("alert.test", &resolve),
                        None,
                    )
                    .await?;
                }
            }
            DestinationKind::Slack | DestinationKind::Webhook => {
                let started = Instant::now();
                let outcome = send(
                    &state.config,
                    (&row, &secret),
                    ("alert.test", &payload),
                    None,
                )
                .await?;
                targets.push(target_of(
                    settings.host.clone().unwrap_or_default(),
                    outcome,
                    started,
                ));
            }
        }
        Ok::<_, ServiceError>(targets)
    };
    let targets = match tokio::time::timeout(WEBHOOK_TIMEOUT, run).await {
        Ok(done) => done?,
        Err(_) => vec![TestTarget {
            target: row.name.clone(),
            status: "failed".to_owned(),
            http_status: None,
            error: Some("no answer within 10 s".to_owned()),
            latency_ms: 10_000,
        }],
    };
    let event = event(
        caller,
        "alert.destination.test",
        &org.id,
        "alert_destination",
        if saved { &row.id } else { "unsaved" },
        json!({
            "kind": kind.name(),
            "results": targets.iter().map(|t| json!({"status": t.status, "httpStatus": t.http_status})).collect::<Vec<_>>(),
        }),
    );
    crate::services::audit::record(&state.infra.store, &[event]).await?;
    Ok(TestResult {
        destination_id: saved.then(|| row.id.clone()),
        targets,
    })
}
