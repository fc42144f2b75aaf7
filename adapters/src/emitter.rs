//! The audit emitter: how another Rust service hands events to the audit trail.
//!
//! `emit` never fails and never blocks the caller: it delivers in the background.
//! An event the server could not take (unreachable, 5xx, timeout) goes to a durable
//! spool on disk, one file per event named by its idempotency key, and is redelivered
//! later with the same `Idempotency-Key`, so a live attempt and its redelivery
//! collapse to one stored row. The spool is bounded; an event that does not fit is
//! dropped and counted. An event the server refuses for good (4xx) is dropped and
//! counted: retrying cannot help it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audit::AuditCounters;

/// An event as a service describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutgoingEvent {
    /// Chosen once, when the event is made; every delivery of it carries the same key.
    pub idempotency_key: String,
    /// `<area>.<entity>.<verb>`, on the remote allow-list.
    pub action: String,
    /// Who acted.
    pub actor_id: String,
    /// Who acted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_email: Option<String>,
    /// The actor's organization.
    pub org_id: String,
    /// The organization operated on, when different.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affected_org_id: Option<String>,
    /// The kind of object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// The object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_id: Option<String>,
    /// Context (no secrets).
    #[serde(default)]
    pub details: Value,
    /// `success` or `failure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
}

impl OutgoingEvent {
    /// A new event with a fresh idempotency key, happening now.
    pub fn new(action: &str, actor_id: &str, org_id: &str) -> Self {
        OutgoingEvent {
            idempotency_key: uuid::Uuid::new_v4().to_string(),
            action: action.to_owned(),
            actor_id: actor_id.to_owned(),
            actor_email: None,
            org_id: org_id.to_owned(),
            affected_org_id: None,
            target_type: None,
            target_id: None,
            details: Value::Object(Default::default()),
            outcome: None,
            occurred_at: Utc::now(),
        }
    }
}

/// How a delivery went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Stored (or already stored under its key).
    Delivered,
    /// Worth trying again later.
    Retry,
    /// Refused for good.
    Refused,
}

/// The client.
#[derive(Debug, Clone)]
pub struct AuditClient {
    http: reqwest::Client,
    url: String,
    token: String,
    spool: PathBuf,
    capacity: usize,
    counters: Arc<AuditCounters>,
}

impl AuditClient {
    /// A client posting to `{base_url}/api/audit/events` with a service token,
    /// spooling to `spool` (created if missing) up to `capacity` events.
    pub fn new(
        base_url: &str,
        service_token: &str,
        spool: impl AsRef<Path>,
        capacity: usize,
    ) -> std::io::Result<Self> {
        std::fs::create_dir_all(spool.as_ref())?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(std::io::Error::other)?;
        Ok(AuditClient {
            http,
            url: format!("{}/api/audit/events", base_url.trim_end_matches('/')),
            token: service_token.to_owned(),
            spool: spool.as_ref().to_owned(),
            capacity,
            counters: Arc::new(AuditCounters::default()),
        })
    }

    /// The five counters (render them on the service's `/metrics`).
    pub fn counters(&self) -> &Arc<AuditCounters> {
        &self.counters
    }

    /// Fire and forget: delivers in the background, spooling on failure.
    pub fn emit(&self, event: OutgoingEvent) {
        AuditCounters::bump(&self.counters.emitted);
        let client = self.clone();
        tokio::spawn(async move {
            client.deliver_or_spool(event).await;
        });
    }

    /// Delivers now, spooling on a failure worth retrying. Returns how it went.
    pub async fn deliver_or_spool(&self, event: OutgoingEvent) -> Delivery {
        let outcome = self.deliver(&event).await;
        match outcome {
            Delivery::Delivered => {}
            Delivery::Refused => AuditCounters::bump(&self.counters.dropped),
            Delivery::Retry => self.spool_event(&event),
        }
        outcome
    }

    /// One attempt.
    pub async fn deliver(&self, event: &OutgoingEvent) -> Delivery {
        let sent = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("Idempotency-Key", &event.idempotency_key)
            .json(&body(event))
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => Delivery::Delivered,
            Ok(response)
                if response.status().is_client_error()
                    && !matches!(response.status().as_u16(), 408 | 429) =>
            {
                tracing::warn!(status = %response.status(), action = %event.action, "audit event refused");
                Delivery::Refused
            }
            Ok(_) | Err(_) => Delivery::Retry,
        }
    }

    fn spool_path(&self, key: &str) -> PathBuf {
        let safe: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.spool.join(format!("{safe}.json"))
    }

    /// How many events wait in the spool.
    pub fn spooled(&self) -> usize {
        std::fs::read_dir(&self.spool)
            .map(|dir| {
                dir.filter_map(Result::ok)
                    .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                    .count()
            })
            .unwrap_or(0)
    }

    fn spool_event(&self, event: &OutgoingEvent) {
        let path = self.spool_path(&event.idempotency_key);
        if !path.exists() && self.spooled() >= self.capacity {
            AuditCounters::bump(&self.counters.spool_dropped);
            tracing::warn!(action = %event.action, "audit spool full: event dropped");
            return;
        }
        let written = serde_json::to_vec(event)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                let partial = path.with_extension("partial");
                std::fs::write(&partial, bytes)?;
                std::fs::rename(&partial, &path)
            });
        match written {
            Ok(()) => AuditCounters::bump(&self.counters.spool_enqueued),
            Err(error) => {
                AuditCounters::bump(&self.counters.dropped);
                tracing::warn!(%error, "audit spool write failed: event dropped");
            }
        }
    }

    /// Tries every spooled event once; returns how many were delivered.
    pub async fn redeliver(&self) -> usize {
        let Ok(dir) = std::fs::read_dir(&self.spool) else {
            return 0;
        };
        let mut paths: Vec<PathBuf> = dir
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        let mut delivered = 0;
        for path in paths {
            let event: OutgoingEvent = match std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
            {
                Some(event) => event,
                None => {
                    let _ = std::fs::remove_file(&path);
                    AuditCounters::bump(&self.counters.dropped);
                    continue;
                }
            };
            match self.deliver(&event).await {
                Delivery::Delivered => {
                    let _ = std::fs::remove_file(&path);
                    AuditCounters::bump(&self.counters.spool_redelivered);
                    delivered += 1;
                }
                Delivery::Refused => {
                    let _ = std::fs::remove_file(&path);
                    AuditCounters::bump(&self.counters.dropped);
                }
                // The server is still away: leave the rest for the next round.
                Delivery::Retry => break,
            }
        }
        delivered
    }

    /// Redelivers the spool every `every`, in the background.
    pub fn spawn_redelivery(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let client = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                client.redeliver().await;
            }
        })
    }
}

fn body(event: &OutgoingEvent) -> Value {
    let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.remove("idempotencyKey");
    }
    value
}
