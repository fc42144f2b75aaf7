//! Notifications (document 1, Events items 2 and 3): what a result calls for, which
//! channels it goes to, and delivering one attempt.
//!
//! A blocked check always notifies; a warning does when the preference asks
//! (`notifyWarnings`); a scan that found blocked entities notifies once, with its
//! counts; an announcement goes to the inbox. The notification and one delivery per
//! channel are written in the transaction of what caused them. Channels: the inbox
//! always (at once, whatever the digest mode); e-mail when `emailEnabled`; the webhook
//! when `webhookUrl` is set and not disabled by a 410. With `digestMode` daily or
//! weekly, e-mail and webhook deliveries are held for their window (UTC days, ISO
//! weeks) and sent as one digest per organization, channel and window.
//!
//! Each attempt goes to the notification log. A receiver sees the notification's id
//! on every attempt (the webhook body's `id`, the `webhook-id` header, the e-mail's
//! `Message-ID`), so a retry is never a second notification.

use std::time::Duration;

use chrono::{DateTime, Utc};
use compliance_core::{Evaluation, Target};
use serde_json::{json, Value};

use super::{ServiceError, ServiceResult};
use crate::notify::{self, Channel};
use crate::services::context::{event, Caller};
use crate::storage::{
    unit_of_work, NewNotification, NotificationPreference, OrgRecord, ScanRecord, Store,
};
pub use crate::storage::{LogEntry, MessageRecord};

/// The most violations a notification carries (its count says how many there were).
pub const MAX_VIOLATIONS: usize = 20;
/// The most notifications a digest lists (its count says how many there were).
pub const MAX_DIGEST_ITEMS: u32 = 100;
/// How long a webhook receiver has to answer.
pub const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// The actor of inbox messages the server posts.
pub const SYSTEM: &str = "system";

/// The channels a notification goes to under `preference`, each with the digest
/// window that holds it. (Announcements go to the inbox alone, written directly.)
pub fn channels(
    preference: &NotificationPreference,
    now: DateTime<Utc>,
) -> Vec<(String, Option<String>)> {
    let mut out = vec![(Channel::Inbox.as_str().to_owned(), None)];
    let held = notify::window(&preference.digest_mode, now).map(|w| w.key);
    if preference.email_enabled {
        out.push((Channel::Email.as_str().to_owned(), held.clone()));
    }
    if preference.webhook_url.is_some() && preference.webhook_disabled_at.is_none() {
        out.push((Channel::Webhook.as_str().to_owned(), held));
    }
    out
}

/// The notification a live check calls for, if any: a block always, a warning when
/// the organization asked.
pub fn for_check(
    preference: &NotificationPreference,
    (org_id, target, entity_id): (&str, Target, Option<&str>),
    evaluation: &Evaluation,
    now: DateTime<Utc>,
) -> Option<NewNotification> {
    let kind = if evaluation.blocked {
        "check.block"
    } else if !evaluation.violations.is_empty() && preference.notify_warnings {
        "check.warn"
    } else {
        return None;
    };
    let violations: Vec<Value> = evaluation
        .violations
        .iter()
        .take(MAX_VIOLATIONS)
        .map(|v| {
            json!({"ruleId": v.rule_id(), "ruleName": v.rule_name(), "severity": v.severity(),
                   "field": v.field(), "message": v.message()})
        })
        .collect();
    Some(NewNotification {
        kind: kind.to_owned(),
        payload: json!({
            "orgId": org_id,
            "target": target.as_str(),
            "entityId": entity_id,
            "result": evaluation.outcome(),
            "violationCount": evaluation.violations.len(),
            "violations": violations,
        }),
        channels: channels(preference, now),
    })
}

/// The notification of a scan that found blocked entities: its counts.
pub fn for_scan(
    preference: &NotificationPreference,
    scan: &ScanRecord,
    now: DateTime<Utc>,
) -> NewNotification {
    NewNotification {
        kind: "scan.block".to_owned(),
        payload: json!({
            "orgId": scan.org_id,
            "scanId": scan.id,
            "target": scan.target,
            "origin": scan.origin,
            "counts": scan.counts,
        }),
        channels: channels(preference, now),
    }
}

/// One line for a notification, as the inbox and e-mail subject show it.
pub fn title(kind: &str, payload: &Value) -> String {
    let text = |k: &str| payload.get(k).and_then(Value::as_str).unwrap_or("");
    match kind {
        "check.block" => format!(
            "A {} was blocked by {} compliance rule violation(s)",
            text("target"),
            payload
                .get("violationCount")
                .and_then(Value::as_u64)
                .unwrap_or(0)
        ),
        "check.warn" => format!(
            "A {} passed with {} compliance warning(s)",
            text("target"),
            payload
                .get("violationCount")
                .and_then(Value::as_u64)
                .unwrap_or(0)
        ),
        "scan.block" => format!(
            "A compliance scan found {} blocked {}(s)",
            payload
                .pointer("/counts/blocked")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            text("target")
        ),
        "digest" => format!(
            "Compliance digest ({}): {} notification(s)",
            text("window"),
            payload.get("count").and_then(Value::as_u64).unwrap_or(0)
        ),
        other => format!("Compliance notification: {other}"),
    }
}

/// A page of the notification log.
pub async fn log(
    store: &Store,
    org: &OrgRecord,
    (channel, status): (Option<&str>, Option<&str>),
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<LogEntry>, u64)> {
    if channel.is_some_and(|c| Channel::parse(c).is_none()) {
        return Err(ServiceError::invalid(
            "channel",
            "must be inbox, email or webhook",
        ));
    }
    const STATUSES: [&str; 7] = [
        "sent", "failed", "retrying", "skipped", "disabled", "held", "digested",
    ];
    if status.is_some_and(|s| !STATUSES.contains(&s)) {
        return Err(ServiceError::invalid(
            "status",
            format!("must be one of {}", STATUSES.join(", ")),
        ));
    }
    Ok(store
        .notification_log(&org.id, (channel, status), limit, offset)
        .await?)
}

/// A page of the organization's inbox.
pub async fn inbox(
    store: &Store,
    org: &OrgRecord,
    unread: Option<bool>,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<MessageRecord>, u64)> {
    Ok(store.messages(&org.id, unread, limit, offset).await?)
}

/// Marks a message read.
pub async fn mark_read(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<MessageRecord> {
    store
        .mark_read(&org.id, id, Utc::now())
        .await
        .map_err(|e| match e {
            crate::storage::StoreError::NotFound(_) => ServiceError::NotFound("message".into()),
            other => other.into(),
        })
}

/// Deletes a message; audited `message.delete` (its kind only, never its text).
pub async fn delete(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<()> {
    let message = store
        .message(&org.id, id)
        .await?
        .ok_or(ServiceError::NotFound("message".into()))?;
    let audit = [event(
        caller,
        "message.delete",
        &org.id,
        "message",
        id,
        json!({"kind": message.kind}),
    )];
    unit_of_work!(store, |tx| {
        tx.delete_message(&org.id, id).await.map_err(|e| match e {
            crate::storage::StoreError::NotFound(_) => ServiceError::NotFound("message".into()),
            other => other.into(),
        })?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })
}
