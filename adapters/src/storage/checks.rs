//! The check log and the snapshots of what entities were last judged on.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::AnyConnection;

use super::decode::Decoder;
use super::{stamp, Cell, Inserts, Rows, Store, StoreResult};

/// A live check to record: its check-log row, the attributes it judged (kept as the
/// entity's snapshot) and the notification it calls for.
#[derive(Debug, Clone)]
pub struct LiveCheck {
    /// Its id (the judgement an entity may refer to).
    pub id: String,
    /// The organization.
    pub org_id: String,
    /// `plugin` or `pipeline`.
    pub target: &'static str,
    /// The entity, when named.
    pub entity_id: Option<String>,
    /// `pass`, `warn` or `block`.
    pub result: &'static str,
    /// The violations, as JSON text.
    pub violations: String,
    /// The attributes judged, as JSON text (none at the inventory's door, whose
    /// create or update keeps them).
    pub snapshot: Option<String>,
    /// The notification it calls for.
    pub notification: Option<super::NewNotification>,
    /// When.
    pub at: DateTime<Utc>,
}

/// One entry of the compliance check log.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckRecord {
    /// Its id.
    pub id: String,
    /// The organization.
    pub org_id: String,
    /// What was checked.
    pub target: compliance_core::Target,
    /// The entity checked, when named.
    pub entity_id: Option<String>,
    /// The outcome.
    pub result: compliance_core::Outcome,
    /// The violations found.
    pub violations: Vec<compliance_core::Violation>,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// How a snapshot is kept: replaced when the attributes differ, left alone when they
/// are the same (a pipeline checked again unchanged, the common case in CI, then
/// writes no new row version); `updated_at` is when the attributes last changed.
const SNAPSHOT_CHANGED: &str = "ON CONFLICT (org_id, target, entity_id) DO UPDATE SET attributes = excluded.attributes, updated_at = excluded.updated_at WHERE entity_snapshots.attributes <> excluded.attributes";

impl Store {
    /// Records live checks atomically: their check-log rows, the entities' snapshots
    /// (for the impact preview) and the notifications they call for (so a crash never
    /// loses one, and a rolled-back check never sends one), each table in one insert,
    /// all of them one statement on PostgreSQL ([`Inserts`]). Of two checks of one
    /// entity the later one's snapshot is kept.
    pub async fn record_live_checks(&self, mut checks: Vec<LiveCheck>) -> StoreResult<()> {
        if checks.is_empty() {
            return Ok(());
        }
        let mut inserts = Inserts::default();
        let mut rows = Rows::new(7);
        for check in &mut checks {
            rows.push(
                [
                    Some(check.id.clone()),
                    Some(check.org_id.clone()),
                    Some(check.target.to_owned()),
                    check.entity_id.clone(),
                    Some(check.result.to_owned()),
                    // Moved, not copied: a failing check's violations run to kilobytes.
                    Some(std::mem::take(&mut check.violations)),
                    Some(stamp(check.at)),
                ]
                .map(Cell::from),
            );
        }
        inserts.push(
            "INSERT INTO compliance_checks (id, org_id, target, entity_id, result, violations, created_at)",
            "",
            rows,
        );
        // One snapshot per entity, the latest check's: the statement may not touch a
        // row twice. The snapshots are moved into the rows, not copied. The rows go in
        // the order of their key, so that two such statements running at once lock
        // the rows they share in the same order: in arrival order, each could hold a
        // row the other waits for (a deadlock PostgreSQL finds only after its
        // `deadlock_timeout`, a second, then rolls one back).
        let mut latest: BTreeMap<(&str, &str, &str), (String, DateTime<Utc>)> = BTreeMap::new();
        for check in checks.iter_mut().rev() {
            let Some(snapshot) = check.snapshot.take() else {
                continue;
            };
            let check: &LiveCheck = check;
            let Some(entity) = &check.entity_id else {
                continue;
            };
            latest
                .entry((check.org_id.as_str(), check.target, entity.as_str()))
                .or_insert((snapshot, check.at));
        }
        let mut rows = Rows::new(5);
        for ((org_id, target, entity), (snapshot, at)) in latest {
            rows.push(
                [
                    Some(org_id.to_owned()),
                    Some(target.to_owned()),
                    Some(entity.to_owned()),
                    Some(snapshot),
                    Some(stamp(at)),
                ]
                .map(Cell::from),
            );
        }
        inserts.push(
            "INSERT INTO entity_snapshots (org_id, target, entity_id, attributes, updated_at)",
            SNAPSHOT_CHANGED,
            rows,
        );
        let notices: Vec<(&str, &super::NewNotification, DateTime<Utc>)> = checks
            .iter()
            .filter_map(|c| {
                c.notification
                    .as_ref()
                    .map(|n| (c.org_id.as_str(), n, c.at))
            })
            .collect();
        super::notifications::push_notifications(&mut inserts, &notices);
        inserts.write(self).await
    }

    /// Keeps the attributes an entity was last judged on (for the impact preview),
    /// inside the caller's transaction.
    pub(crate) async fn put_snapshot(
        &self,
        conn: &mut AnyConnection,
        (org_id, target, entity_id): (&str, &str, &str),
        attributes: &Value,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            &format!("INSERT INTO entity_snapshots (org_id, target, entity_id, attributes, updated_at) VALUES ($1, $2, $3, $4, $5) {SNAPSHOT_CHANGED}"),
        ))
        .bind(org_id)
        .bind(target)
        .bind(entity_id)
        .bind(attributes.to_string())
        .bind(stamp(now))
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// A page of the check log, filtered by target, result and entity.
    pub async fn checks(
        &self,
        org_id: &str,
        target: Option<&str>,
        result: Option<&str>,
        entity_id: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<CheckRecord>, u64)> {
        // Judgements kept only for their entities (`listed = 0`) are no entries.
        let condition = "org_id = $1 AND listed = 1 AND ($2 IS NULL OR target = $2) AND ($3 IS NULL OR result = $3) AND ($4 IS NULL OR entity_id = $4)";
        let binds = [Some(org_id), target, result, entity_id].map(|b| b.map(str::to_owned));
        let (rows, total) = self
            .page(
                (
                    "*",
                    "compliance_checks",
                    condition,
                    "created_at DESC, id DESC",
                ),
                &binds,
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(|row| {
                let d = Decoder::new(row, "compliance_checks", &["id"]);
                Ok(CheckRecord {
                    id: d.get("id")?,
                    org_id: d.get("org_id")?,
                    target: d.named("target", |t| t.parse().ok())?,
                    entity_id: d.get("entity_id")?,
                    result: d.named("result", |r| r.parse().ok())?,
                    violations: d.json("violations")?,
                    created_at: d.stamp("created_at")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }

    /// Deletes check-log entries older than `cutoff`, but for the judgements an entity
    /// refers to (each entity's latest), found by the entity's primary key.
    pub async fn prune_checks(&self, cutoff: DateTime<Utc>) -> StoreResult<u64> {
        let done = sqlx::query(&self.sql(
            "DELETE FROM compliance_checks WHERE created_at < $1 \
             AND NOT EXISTS (SELECT 1 FROM pipelines p WHERE p.id = compliance_checks.entity_id AND p.judgement_check = compliance_checks.id) \
             AND NOT EXISTS (SELECT 1 FROM plugins p WHERE p.id = compliance_checks.entity_id AND p.judgement_check = compliance_checks.id)",
        ))
        .bind(stamp(cutoff))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// The stored snapshots of an organization's entities of one target (at most `limit`).
    pub async fn snapshots(
        &self,
        org_id: &str,
        target: &str,
        limit: u32,
    ) -> StoreResult<Vec<(String, Value)>> {
        let rows = sqlx::query(&self.sql(
            "SELECT entity_id, attributes FROM entity_snapshots WHERE org_id = $1 AND target = $2 ORDER BY entity_id LIMIT $3",
        ))
        .bind(org_id)
        .bind(target)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "entity_snapshots", &["entity_id"]);
                Ok((d.get("entity_id")?, d.json("attributes")?))
            })
            .collect()
    }
}
