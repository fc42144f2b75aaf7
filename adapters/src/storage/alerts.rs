//! Alert destinations, rules, their history and the tests' per-minute counts: SQL
//! only. Reads on the pool; writes are steps of the service's transaction. An
//! evaluation's write is conditional on the rule's `evaluations` count it started
//! from, so two evaluators (replicas, a restart, a lease that changed hands) never
//! both write a transition or its notification.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::Row;

use super::decode::Decoder;
use super::{new_id, placeholders, stamp, NewNotification, Store, StoreResult, Transaction};
mod writes;

/// The alert tables a cap counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertTable {
    /// `alert_rules`.
    Rules,
    /// `alert_destinations`.
    Destinations,
}

impl AlertTable {
    fn name(self) -> &'static str {
        match self {
            AlertTable::Rules => "alert_rules",
            AlertTable::Destinations => "alert_destinations",
        }
    }
}

/// A destination as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct DestinationRow {
    /// Its id.
    pub id: String,
    /// Its organization.
    pub org_id: String,
    /// Its name (unique in the organization, case aside).
    pub name: String,
    /// `email`, `slack`, `webhook` or `pagerduty`.
    pub kind: String,
    /// What is not secret (addresses, the secret's hint).
    pub settings: Value,
    /// The secret, sealed.
    pub secret: Option<String>,
    /// Raised by each change.
    pub version: i64,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

fn destination(row: &sqlx::any::AnyRow) -> StoreResult<DestinationRow> {
    let d = Decoder::new(row, "alert_destinations", &["id"]);
    Ok(DestinationRow {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        name: d.get("name")?,
        kind: d.get("kind")?,
        settings: d.json("settings")?,
        secret: d.get("secret")?,
        version: d.get("version")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
    })
}

/// A rule as stored, with where it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertRuleRow {
    /// Its id.
    pub id: String,
    /// Its organization.
    pub org_id: String,
    /// Its name.
    pub name: String,
    /// What it says (the service reads it).
    pub body: Value,
    /// Not evaluated while paused.
    pub paused: bool,
    /// Raised by each change of the rule.
    pub version: i64,
    /// Its state's name.
    pub state: String,
    /// What the evaluation remembers (the service reads it).
    pub tracker: Value,
    /// Raised by each evaluation written.
    pub evaluations: i64,
    /// Notices made so far (the next one's number is this plus one).
    pub notices: i64,
    /// When it is next due.
    pub next_evaluation_at: DateTime<Utc>,
    /// When it was last evaluated.
    pub last_evaluated_at: Option<DateTime<Utc>>,
    /// Its destinations' ids.
    pub destinations: Vec<String>,
    /// Who made it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

fn rule(row: &sqlx::any::AnyRow, destinations: Vec<String>) -> StoreResult<AlertRuleRow> {
    let d = Decoder::new(row, "alert_rules", &["id"]);
    Ok(AlertRuleRow {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        name: d.get("name")?,
        body: d.json("body")?,
        paused: d.flag("paused")?,
        version: d.get("version")?,
        state: d.get("state")?,
        tracker: d.json("tracker")?,
        evaluations: d.get("evaluations")?,
        notices: d.get("notices")?,
        next_evaluation_at: d.stamp("next_evaluation_at")?,
        last_evaluated_at: d.opt_stamp("last_evaluated_at")?,
        destinations,
        created_by: d.get("created_by")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
    })
}

/// One transition of a rule's history.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionRow {
    /// Its number in the rule's history.
    pub seq: i64,
    /// When.
    pub at: DateTime<Utc>,
    /// The state before.
    pub from_state: String,
    /// The state after.
    pub to_state: String,
    /// The value observed (JSON text of a number).
    pub value: Option<f64>,
    /// `firing`, `repeat` or `resolved` when it made a notification.
    pub notice: Option<String>,
    /// The notification it made.
    pub notification_id: Option<String>,
}

/// One delivery of a rule's notifications, as it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertDeliveryRow {
    /// The notification.
    pub notification_id: String,
    /// The destination's id.
    pub destination_id: String,
    /// `pending`, `sent`, `failed`...
    pub status: String,
    /// Attempts made.
    pub attempts: u32,
    /// The last error.
    pub last_error: Option<String>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// What an evaluation writes, conditional on the count it read.
#[derive(Debug, Clone)]
pub struct EvaluationWrite<'a> {
    /// The rule.
    pub rule_id: &'a str,
    /// The `evaluations` it read.
    pub expected: i64,
    /// The new state's name.
    pub state: &'a str,
    /// The new tracker.
    pub tracker: &'a Value,
    /// Notices after it.
    pub notices: i64,
    /// When it was evaluated.
    pub at: DateTime<Utc>,
    /// When it is next due.
    pub next: DateTime<Utc>,
}

async fn destinations_of(
    conn: &mut sqlx::AnyConnection,
    store: &Store,
    rule_ids: &[String],
) -> StoreResult<Vec<(String, String)>> {
    if rule_ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = store.sql(&format!(
        "SELECT rule_id, destination_id FROM alert_rule_destinations WHERE rule_id IN ({}) ORDER BY rule_id, destination_id",
        placeholders(1, rule_ids.len())
    ));
    let mut query = sqlx::query(&sql);
    for id in rule_ids {
        query = query.bind(id.clone());
    }
    let rows = query.fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|r| Ok((r.try_get("rule_id")?, r.try_get("destination_id")?)))
        .collect()
}

impl Store {
    async fn rules_where(&self, clause: &str, binds: &[&str]) -> StoreResult<Vec<AlertRuleRow>> {
        let sql = self.sql(&format!("SELECT * FROM alert_rules WHERE {clause}"));
        let mut query = sqlx::query(&sql);
        for b in binds {
            query = query.bind((*b).to_owned());
        }
        let mut conn = self.connection().await?;
        let rows = query.fetch_all(&mut *conn).await?;
        let ids: Vec<String> = rows
            .iter()
            .map(|r| r.try_get::<String, _>("id"))
            .collect::<Result<_, _>>()?;
        let links = destinations_of(&mut conn, self, &ids).await?;
        conn.finish().await?;
        rows.iter()
            .map(|r| {
                let id: String = r.try_get("id")?;
                let mine = links
                    .iter()
                    .filter(|(rule_id, _)| *rule_id == id)
                    .map(|(_, d)| d.clone())
                    .collect();
                rule(r, mine)
            })
            .collect()
    }

    /// The organization's rules by name.
    pub async fn alert_rules(&self, org_id: &str) -> StoreResult<Vec<AlertRuleRow>> {
        self.rules_where("org_id = $1 ORDER BY lower(name), id", &[org_id])
            .await
    }

    /// One rule of the organization.
    pub async fn alert_rule(&self, org_id: &str, id: &str) -> StoreResult<Option<AlertRuleRow>> {
        Ok(self
            .rules_where("org_id = $1 AND id = $2", &[org_id, id])
            .await?
            .into_iter()
            .next())
    }

    /// The organization's rules in a state (`firing`), by name.
    pub async fn alert_rules_in(
        &self,
        org_id: &str,
        state: &str,
    ) -> StoreResult<Vec<AlertRuleRow>> {
        self.rules_where(
            "org_id = $1 AND state = $2 ORDER BY lower(name), id",
            &[org_id, state],
        )
        .await
    }

    /// Up to `limit` rules due at `now` (not paused, of a live organization), by
    /// id after `after` (a round pages through them once).
    pub async fn due_alert_rules(
        &self,
        now: DateTime<Utc>,
        after: &str,
        limit: u32,
    ) -> StoreResult<Vec<AlertRuleRow>> {
        self.rules_where(
            &format!(
                "paused = 0 AND next_evaluation_at <= $1 AND id > $2
                 AND org_id IN (SELECT id FROM organizations WHERE deleted_at IS NULL)
                 ORDER BY id LIMIT {limit}"
            ),
            &[&stamp(now), after],
        )
        .await
    }

    /// The organization's destinations by name.
    pub async fn alert_destinations(&self, org_id: &str) -> StoreResult<Vec<DestinationRow>> {
        let rows = sqlx::query(
            &self
                .sql("SELECT * FROM alert_destinations WHERE org_id = $1 ORDER BY lower(name), id"),
        )
        .bind(org_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(destination).collect()
    }

    /// One destination of the organization.
    pub async fn alert_destination(
        &self,
        org_id: &str,
        id: &str,
    ) -> StoreResult<Option<DestinationRow>> {
        let row = sqlx::query(
            &self.sql("SELECT * FROM alert_destinations WHERE org_id = $1 AND id = $2"),
        )
        .bind(org_id)
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(destination).transpose()
    }

    /// A rule's transitions, newest first, at most `limit`.
    pub async fn alert_transitions(
        &self,
        rule_id: &str,
        limit: u32,
    ) -> StoreResult<Vec<TransitionRow>> {
        let rows = sqlx::query(
            &self.sql("SELECT * FROM alert_history WHERE rule_id = $1 ORDER BY seq DESC LIMIT $2"),
        )
        .bind(rule_id)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "alert_history", &["id"]);
                let value = d
                    .get::<Option<String>>("value")?
                    .map(|v| {
                        v.parse::<f64>()
                            .map_err(|_| d.reject("value", "not a number"))
                    })
                    .transpose()?;
                Ok(TransitionRow {
                    seq: d.get("seq")?,
                    at: d.stamp("at")?,
                    from_state: d.get("from_state")?,
                    to_state: d.get("to_state")?,
                    value,
                    notice: d.get("notice")?,
                    notification_id: d.get("notification_id")?,
                })
            })
            .collect()
    }

    /// The deliveries of the notifications listed (an alert's channel is
    /// `alert:<destination id>`).
    pub async fn alert_deliveries(
        &self,
        notification_ids: &[String],
    ) -> StoreResult<Vec<AlertDeliveryRow>> {
        if notification_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = self.sql(&format!(
            "SELECT notification_id, channel, status, attempts, last_error, updated_at FROM deliveries
             WHERE notification_id IN ({}) ORDER BY notification_id, channel",
            placeholders(1, notification_ids.len())
        ));
        let mut query = sqlx::query(&sql);
        for id in notification_ids {
            query = query.bind(id.clone());
        }
        let rows = query.fetch_all(self.pool()).await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "deliveries", &["notification_id", "channel"]);
                let channel: String = d.get("channel")?;
                Ok(AlertDeliveryRow {
                    notification_id: d.get("notification_id")?,
                    destination_id: channel
                        .strip_prefix("alert:")
                        .unwrap_or(&channel)
                        .to_owned(),
                    status: d.get("status")?,
                    attempts: d.u32("attempts")?,
                    last_error: d.get("last_error")?,
                    updated_at: d.stamp("updated_at")?,
                })
            })
            .collect()
    }

    /// Counts one test of a destination in the organization's minute, in one
    /// statement: the count after it, or `None` when `limit` was reached.
    pub async fn count_alert_test(
        &self,
        org_id: &str,
        minute: &str,
        limit: u32,
    ) -> StoreResult<Option<u32>> {
        let row = sqlx::query(&self.sql(
            "INSERT INTO alert_test_windows (org_id, minute, tests) VALUES ($1, $2, 1)
             ON CONFLICT (org_id, minute) DO UPDATE SET tests = alert_test_windows.tests + 1
             WHERE alert_test_windows.tests < $3
             RETURNING tests",
        ))
        .bind(org_id)
        .bind(minute)
        .bind(i64::from(limit))
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| {
            r.try_get::<i64, _>("tests")
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        })
        .transpose()
        .map_err(Into::into)
    }

    /// Forgets test counts of minutes before `minute`.
    pub async fn prune_alert_tests(&self, minute: &str) -> StoreResult<u64> {
        let done = sqlx::query(&self.sql("DELETE FROM alert_test_windows WHERE minute < $1"))
            .bind(minute)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }
}
