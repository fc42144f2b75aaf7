//! Notifications, their deliveries, digests, the notification log and the inbox: SQL
//! only. A notification and its deliveries are written in the transaction of what
//! caused them; the delivery worker claims one due delivery at a time (`FOR UPDATE
//! SKIP LOCKED` on PostgreSQL), fenced by its lease, and records each attempt with
//! the delivery's next state in one transaction.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::{AnyConnection, Row};

use super::decode::Decoder;
use super::{
    new_id, placeholders, stamp, Cell, Dialect, Inserts, Rows, Store, StoreError, StoreResult,
    Transaction,
};
mod writes;

/// A notification to write, with the channels it goes to.
#[derive(Debug, Clone)]
pub struct NewNotification {
    /// `check.block`, `check.warn`, `scan.block`, `announcement` or `digest`.
    pub kind: String,
    /// What it says (bounded by its maker).
    pub payload: Value,
    /// Each channel, and the digest window that holds it (`None`: sent at once).
    pub channels: Vec<(String, Option<String>)>,
}

/// A delivery claimed by the worker, with its notification.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedDelivery {
    /// The delivery.
    pub id: String,
    /// Its notification (the stable id receivers see).
    pub notification_id: String,
    /// The organization.
    pub org_id: String,
    /// `inbox`, `email` or `webhook`.
    pub channel: String,
    /// Attempts before this one.
    pub attempts: u32,
    /// The claim.
    pub lease_until: DateTime<Utc>,
    /// The notification's kind.
    pub kind: String,
    /// The notification's payload.
    pub payload: Value,
    /// When the notification was made.
    pub created_at: DateTime<Utc>,
}

/// How an attempt ended, and what the delivery becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt<'a> {
    /// The log's status: `sent`, `failed`, `retrying`, `skipped`, `disabled`.
    pub status: &'a str,
    /// The delivery's new status: `sent`, `failed`, `pending`, `skipped`, `disabled`.
    pub delivery_status: &'a str,
    /// The receiver's HTTP status, when there was one.
    pub response_status: Option<u16>,
    /// What went wrong.
    pub error: Option<&'a str>,
    /// When a retry is due.
    pub run_after: DateTime<Utc>,
}

/// One row of the notification log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    /// Its id.
    pub id: String,
    /// The notification.
    pub notification_id: String,
    /// `inbox`, `email` or `webhook`.
    pub channel: String,
    /// `sent`, `failed`, `retrying`, `skipped`, `disabled`, `held`, `digested`.
    pub status: String,
    /// The attempt's number (0 for held and digested).
    pub attempt: u32,
    /// The receiver's HTTP status.
    pub response_status: Option<u16>,
    /// What went wrong, or why it was skipped.
    pub error: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
}

/// A held notification as a digest lists it: its kind, payload and time.
pub type HeldItem = (String, Value, DateTime<Utc>);

/// Makes a digest from the held notifications listed and how many there were.
pub type DigestMaker = dyn Fn(&[HeldItem], u64) -> NewNotification + Sync;

/// A window of held deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldWindow {
    /// The organization.
    pub org_id: String,
    /// `email` or `webhook`.
    pub channel: String,
    /// The window's key.
    pub window: String,
}

fn log_from_row(row: &sqlx::any::AnyRow) -> StoreResult<LogEntry> {
    let d = Decoder::new(row, "notification_log", &["id"]);
    let response: Option<i64> = d.get("response_status")?;
    Ok(LogEntry {
        id: d.get("id")?,
        notification_id: d.get("notification_id")?,
        channel: d.get("channel")?,
        status: d.get("status")?,
        attempt: d.u32("attempt")?,
        response_status: response
            .map(|n| u16::try_from(n).map_err(|_| d.reject("response_status", "out of range")))
            .transpose()?,
        error: d.get("error")?,
        at: d.stamp("at")?,
    })
}

/// Notifications, their deliveries and the held ones' log entries, each table one
/// part of a group of inserts written together (`Store::record_live_checks`).
pub(crate) fn push_notifications(
    inserts: &mut Inserts,
    notifications: &[(&str, &NewNotification, DateTime<Utc>)],
) {
    for (head, rows) in notification_rows(notifications) {
        inserts.push(head, "", rows);
    }
}

/// The rows of notifications, their deliveries and the held ones' log entries, each
/// with its table's `INSERT` (in the order their foreign keys need).
fn notification_rows(
    notifications: &[(&str, &NewNotification, DateTime<Utc>)],
) -> [(&'static str, Rows); 3] {
    let mut made = Rows::new(5);
    let mut deliveries = Rows::new(13);
    let mut held = Rows::new(10);
    for (org_id, notification, now) in notifications {
        let id = new_id();
        let at = stamp(*now);
        made.push([
            Cell::from(id.as_str()),
            Cell::from(*org_id),
            Cell::from(notification.kind.as_str()),
            Cell::from(notification.payload.to_string()),
            Cell::from(at.as_str()),
        ]);
        for (channel, window) in &notification.channels {
            let delivery = new_id();
            deliveries.push([
                Cell::from(delivery.as_str()),
                Cell::from(id.as_str()),
                Cell::from(*org_id),
                Cell::from(channel.as_str()),
                Cell::from(if window.is_some() { "held" } else { "pending" }),
                Cell::from(0),
                Cell::from(at.as_str()),
                Cell::Text(None),
                Cell::from(window.clone()),
                Cell::Text(None),
                Cell::Text(None),
                Cell::from(at.as_str()),
                Cell::from(at.as_str()),
            ]);
            if window.is_some() {
                held.push([
                    Cell::from(new_id()),
                    Cell::from(*org_id),
                    Cell::from(id.as_str()),
                    Cell::from(delivery.as_str()),
                    Cell::from(channel.as_str()),
                    Cell::from("held"),
                    Cell::from(0),
                    Cell::Int(None),
                    Cell::from(window.clone()),
                    Cell::from(at.as_str()),
                ]);
            }
        }
    }
    [
        (
            "INSERT INTO notifications (id, org_id, kind, payload, created_at)",
            made,
        ),
        (
            "INSERT INTO deliveries (id, notification_id, org_id, channel, status, attempts, run_after, \
             lease_until, digest_window, digest_id, last_error, created_at, updated_at)",
            deliveries,
        ),
        (
            "INSERT INTO notification_log (id, org_id, notification_id, delivery_id, channel, status, attempt, \
             response_status, error, at)",
            held,
        ),
    ]
}

impl Store {
    /// Writes a notification and its deliveries in the caller's transaction; a held
    /// delivery is logged `held`. Answers the notification's id.
    pub(crate) async fn insert_notification(
        &self,
        conn: &mut AnyConnection,
        org_id: &str,
        notification: &NewNotification,
        now: DateTime<Utc>,
    ) -> StoreResult<String> {
        let id = new_id();
        sqlx::query(&self.sql(
            "INSERT INTO notifications (id, org_id, kind, payload, created_at) VALUES ($1, $2, $3, $4, $5)",
        ))
        .bind(&id)
        .bind(org_id)
        .bind(&notification.kind)
        .bind(notification.payload.to_string())
        .bind(stamp(now))
        .execute(&mut *conn)
        .await?;
        for (channel, window) in &notification.channels {
            let delivery = new_id();
            let status = if window.is_some() { "held" } else { "pending" };
            sqlx::query(&self.sql(
                "INSERT INTO deliveries (id, notification_id, org_id, channel, status, attempts, run_after, \
                 lease_until, digest_window, digest_id, last_error, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, 0, $6, NULL, $7, NULL, NULL, $6, $6)",
            ))
            .bind(&delivery)
            .bind(&id)
            .bind(org_id)
            .bind(channel)
            .bind(status)
            .bind(stamp(now))
            .bind(window.clone())
            .execute(&mut *conn)
            .await?;
            if window.is_some() {
                self.log_attempt(
                    conn,
                    (org_id, &id, &delivery, channel),
                    ("held", 0),
                    (None, window.as_deref()),
                    now,
                )
                .await?;
            }
        }
        Ok(id)
    }

    async fn log_attempt(
        &self,
        conn: &mut AnyConnection,
        (org_id, notification_id, delivery_id, channel): (&str, &str, &str, &str),
        (status, attempt): (&str, u32),
        (response_status, error): (Option<u16>, Option<&str>),
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO notification_log (id, org_id, notification_id, delivery_id, channel, status, attempt, \
             response_status, error, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        ))
        .bind(new_id())
        .bind(org_id)
        .bind(notification_id)
        .bind(delivery_id)
        .bind(channel)
        .bind(status)
        .bind(i64::from(attempt))
        .bind(response_status.map(i64::from))
        .bind(error)
        .bind(stamp(now))
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Claims the oldest due delivery (pending, or claimed under an expired lease)
    /// until `lease_until`.
    pub async fn claim_delivery(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<ClaimedDelivery>> {
        let lock = match self.dialect() {
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
            Dialect::Sqlite => "",
        };
        let due =
            "status = 'pending' AND run_after <= $1 AND (lease_until IS NULL OR lease_until < $1)";
        let claimed = sqlx::query(&self.sql(&format!(
            "UPDATE deliveries SET lease_until = $2 WHERE id = (\
             SELECT id FROM deliveries WHERE {due} ORDER BY run_after, id LIMIT 1{lock}) AND {due} \
             RETURNING id, notification_id, org_id, channel, attempts"
        )))
        .bind(stamp(now))
        .bind(stamp(lease_until))
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = claimed else {
            return Ok(None);
        };
        let d = Decoder::new(&row, "deliveries", &["id"]);
        let notification_id: String = d.get("notification_id")?;
        let note = sqlx::query(&self.sql("SELECT * FROM notifications WHERE id = $1"))
            .bind(&notification_id)
            .fetch_one(self.pool())
            .await?;
        let n = Decoder::new(&note, "notifications", &["id"]);
        Ok(Some(ClaimedDelivery {
            id: d.get("id")?,
            notification_id,
            org_id: d.get("org_id")?,
            channel: d.get("channel")?,
            attempts: d.u32("attempts")?,
            lease_until,
            kind: n.get("kind")?,
            payload: n.json("payload")?,
            created_at: n.stamp("created_at")?,
        }))
    }

    /// Puts a claimed delivery back in its queue without an attempt (its
    /// organization's key cannot be used now): due again at `run_after`, or as soon
    /// as the key recovers. Whether the claim still held.
    pub async fn defer_delivery(
        &self,
        claimed: &ClaimedDelivery,
        run_after: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.sql(
            "UPDATE deliveries SET run_after = $3, lease_until = NULL, last_error = $4, updated_at = $5 \
             WHERE id = $1 AND lease_until = $2",
        ))
        .bind(&claimed.id)
        .bind(stamp(claimed.lease_until))
        .bind(stamp(run_after))
        .bind(super::WAITING_FOR_KEY)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// A page of the organization's notification log (the compliance
    /// notifications' channels), newest first.
    pub async fn notification_log(
        &self,
        org_id: &str,
        (channel, status): (Option<&str>, Option<&str>),
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<LogEntry>, u64)> {
        let (rows, total) = self
            .page(
                (
                    "*",
                    "notification_log",
                    // Alert deliveries (`alert:<destination>`) are their rules' history.
                    "org_id = $1 AND channel IN ('inbox', 'email', 'webhook') AND ($2 IS NULL OR channel = $2) \
                     AND ($3 IS NULL OR status = $3)",
                    "at DESC, id DESC",
                ),
                &[
                    Some(org_id.to_owned()),
                    channel.map(str::to_owned),
                    status.map(str::to_owned),
                ],
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(log_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }

    /// The windows that hold deliveries.
    pub async fn held_windows(&self) -> StoreResult<Vec<HeldWindow>> {
        let rows = sqlx::query(
            "SELECT DISTINCT org_id, channel, digest_window FROM deliveries WHERE status = 'held' ORDER BY org_id, channel, digest_window",
        )
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "deliveries", &[]);
                Ok(HeldWindow {
                    org_id: d.get("org_id")?,
                    channel: d.get("channel")?,
                    window: d.get("digest_window")?,
                })
            })
            .collect()
    }

    /// Prunes the history older than `cutoff` (the check log's retention): ended scans
    /// and their results, ended deliveries and the notifications left without any,
    /// the notification log, digests of past windows and read messages. Running scans,
    /// pending and held deliveries and unread messages stay. Answers the rows deleted.
    pub async fn prune_history(&self, cutoff: DateTime<Utc>) -> StoreResult<u64> {
        let mut deleted = 0;
        for statement in [
            // The results an entity refers to (its latest judgement) stay.
            "DELETE FROM scan_results WHERE scan_id IN (SELECT id FROM scans WHERE status <> 'running' AND ended_at < $1) \
             AND NOT EXISTS (SELECT 1 FROM pipelines p WHERE scan_results.target = 'pipeline' AND p.id = scan_results.entity_id AND p.judgement_scan = scan_results.scan_id) \
             AND NOT EXISTS (SELECT 1 FROM plugins p WHERE scan_results.target = 'plugin' AND p.id = scan_results.entity_id AND p.judgement_scan = scan_results.scan_id)",
            "DELETE FROM scans WHERE status <> 'running' AND ended_at < $1",
            "DELETE FROM deliveries WHERE status IN ('sent', 'failed', 'skipped', 'digested', 'disabled') AND updated_at < $1",
            "DELETE FROM notifications WHERE created_at < $1 AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.notification_id = notifications.id)",
            "DELETE FROM notification_log WHERE at < $1",
            "DELETE FROM digests WHERE created_at < $1",
            "DELETE FROM messages WHERE read_at IS NOT NULL AND created_at < $1",
        ] {
            let done = sqlx::query(&self.sql(statement))
                .bind(stamp(cutoff))
                .execute(self.pool())
                .await?;
            deleted += done.rows_affected();
        }
        Ok(deleted)
    }

    /// Turns a webhook off after a 410 Gone, until its URL is saved again.
    pub async fn disable_webhook(&self, org_id: &str, now: DateTime<Utc>) -> StoreResult<()> {
        sqlx::query(
            &self.sql(
                "UPDATE notification_preferences SET webhook_disabled_at = $2 WHERE org_id = $1",
            ),
        )
        .bind(org_id)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The e-mail addresses of the organization's active admins and owner.
    pub async fn admin_emails(&self, org_id: &str) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(&self.sql(
            "SELECT DISTINCT u.email FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE m.org_id = $1 AND m.active = 1 AND m.role IN ('owner', 'admin') \
             AND u.email IS NOT NULL ORDER BY u.email",
        ))
        .bind(org_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("email").map_err(StoreError::from))
            .collect()
    }

    /// The e-mail addresses of the named members of the organization.
    pub async fn member_emails(
        &self,
        org_id: &str,
        user_ids: &[String],
    ) -> StoreResult<Vec<String>> {
        if user_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = self.sql(&format!(
            "SELECT DISTINCT u.email FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE m.org_id = $1 AND m.active = 1 AND u.email IS NOT NULL \
             AND m.user_id IN ({}) ORDER BY u.email",
            placeholders(2, user_ids.len())
        ));
        let mut query = sqlx::query(&sql).bind(org_id.to_owned());
        for id in user_ids {
            query = query.bind(id.clone());
        }
        let rows = query.fetch_all(self.pool()).await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("email").map_err(StoreError::from))
            .collect()
    }
}
