//! Exemptions: requested, reviewed, revoked; the approved ones a check applies.

use chrono::{DateTime, Utc};
use compliance_core::{Exemption, ExemptionStatus};
use serde::Serialize;

use super::decode::Decoder;
use super::{new_id, stamp, Store, StoreError, StoreResult};

/// An exemption as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExemptionRecord {
    /// Its id.
    pub id: String,
    /// The organization.
    pub org_id: String,
    /// The rule waived.
    pub rule_id: String,
    /// The entity it applies to.
    pub entity_id: String,
    /// Why.
    pub reason: String,
    /// requested, approved, rejected or revoked.
    pub status: ExemptionStatus,
    /// Who asked.
    pub requested_by: String,
    /// Who reviewed.
    pub reviewed_by: Option<String>,
    /// The reviewer's note.
    pub review_note: Option<String>,
    /// When it stops waiving.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was requested.
    pub created_at: DateTime<Utc>,
}

impl ExemptionRecord {
    /// compliance-core's view of it.
    pub fn exemption(&self) -> Exemption {
        Exemption {
            rule_id: self.rule_id.clone(),
            entity_id: self.entity_id.clone(),
            status: self.status,
            expires_at: self.expires_at,
        }
    }
}

/// A new exemption request.
#[derive(Debug, Clone)]
pub struct NewExemption {
    /// The rule.
    pub rule_id: String,
    /// The entity.
    pub entity_id: String,
    /// Why.
    pub reason: String,
    /// When it should stop waiving.
    pub expires_at: Option<DateTime<Utc>>,
}

fn status_name(status: ExemptionStatus) -> &'static str {
    match status {
        ExemptionStatus::Requested => "requested",
        ExemptionStatus::Approved => "approved",
        ExemptionStatus::Rejected => "rejected",
        ExemptionStatus::Revoked => "revoked",
    }
}

fn status_of(text: &str) -> Option<ExemptionStatus> {
    match text {
        "requested" => Some(ExemptionStatus::Requested),
        "approved" => Some(ExemptionStatus::Approved),
        "rejected" => Some(ExemptionStatus::Rejected),
        "revoked" => Some(ExemptionStatus::Revoked),
        _ => None,
    }
}

pub(super) fn exemption_from_row(row: &sqlx::any::AnyRow) -> StoreResult<ExemptionRecord> {
    let d = Decoder::new(row, "exemptions", &["id"]);
    Ok(ExemptionRecord {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        rule_id: d.get("rule_id")?,
        entity_id: d.get("entity_id")?,
        reason: d.get("reason")?,
        status: d.named("status", status_of)?,
        requested_by: d.get("requested_by")?,
        reviewed_by: d.get("reviewed_by")?,
        review_note: d.get("review_note")?,
        expires_at: d.opt_stamp("expires_at")?,
        created_at: d.stamp("created_at")?,
    })
}

impl Store {
    /// One exemption of an organization.
    pub async fn exemption(&self, org_id: &str, id: &str) -> StoreResult<Option<ExemptionRecord>> {
        let row = sqlx::query(&self.sql("SELECT * FROM exemptions WHERE org_id = $1 AND id = $2"))
            .bind(org_id)
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(exemption_from_row).transpose()
    }

    /// A page of an organization's exemptions, filtered by status, rule and entity.
    pub async fn exemptions(
        &self,
        org_id: &str,
        status: Option<&str>,
        rule_id: Option<&str>,
        entity_id: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<ExemptionRecord>, u64)> {
        let condition = "org_id = $1 AND ($2 IS NULL OR status = $2) AND ($3 IS NULL OR rule_id = $3) AND ($4 IS NULL OR entity_id = $4)";
        let binds = [Some(org_id), status, rule_id, entity_id].map(|b| b.map(str::to_owned));
        let (rows, total) = self
            .page(
                ("*", "exemptions", condition, "created_at DESC, id DESC"),
                &binds,
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(exemption_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }

    /// The approved exemptions of an entity (expiry is checked by the caller at `now`).
    pub async fn approved_exemptions(
        &self,
        org_id: &str,
        entity_id: &str,
    ) -> StoreResult<Vec<Exemption>> {
        let rows = sqlx::query(&self.sql(
            "SELECT * FROM exemptions WHERE org_id = $1 AND entity_id = $2 AND status = 'approved'",
        ))
        .bind(org_id)
        .bind(entity_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| exemption_from_row(r).map(|e| e.exemption()))
            .collect()
    }

    /// Whether the organization has any approved exemption.
    pub async fn any_approved_exemption(&self, org_id: &str) -> StoreResult<bool> {
        let row = sqlx::query(&self.sql(
            "SELECT 1 AS found FROM exemptions WHERE org_id = $1 AND status = 'approved' LIMIT 1",
        ))
        .bind(org_id)
        .fetch_optional(self.pool())
        .await?;
        Ok(row.is_some())
    }
}

impl super::Transaction<'_> {
    /// Stores exemption requests, all or nothing.
    pub async fn request_exemptions(
        &mut self,
        org_id: &str,
        requests: &[NewExemption],
        by: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<String>> {
        let mut ids = Vec::with_capacity(requests.len());
        for request in requests {
            let id = new_id();
            sqlx::query(&self.store.sql(
                "INSERT INTO exemptions (id, org_id, rule_id, entity_id, reason, status, requested_by, expires_at, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, 'requested', $6, $7, $8, $8)",
            ))
            .bind(&id)
            .bind(org_id)
            .bind(&request.rule_id)
            .bind(&request.entity_id)
            .bind(&request.reason)
            .bind(by)
            .bind(request.expires_at.map(stamp))
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?;
            ids.push(id);
        }
        Ok(ids)
    }

    /// Moves an exemption from one of `transition.0` to `transition.1`, recording who.
    pub async fn set_exemption_status(
        &mut self,
        org_id: &str,
        id: &str,
        (from, to): (&[ExemptionStatus], ExemptionStatus),
        (by, note): (&str, Option<&str>),
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let allowed: Vec<String> = from
            .iter()
            .map(|s| format!("'{}'", status_name(*s)))
            .collect();
        let done = sqlx::query(&self.store.sql(&format!(
            "UPDATE exemptions SET status = $3, reviewed_by = $4, review_note = COALESCE($5, review_note), updated_at = $6
             WHERE org_id = $1 AND id = $2 AND status IN ({})",
            allowed.join(", ")
        )))
        .bind(org_id)
        .bind(id)
        .bind(status_name(to))
        .bind(by)
        .bind(note)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Conflict(format!(
                "the exemption cannot become {}",
                status_name(to)
            )));
        }
        Ok(())
    }
}
