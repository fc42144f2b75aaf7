//! Subscriptions, exemptions, policies, the check log and notification preferences,
//! always scoped by organization.

use audit_chain::AuditEvent;
use chrono::{DateTime, Utc};
use compliance_core::{Exemption, ExemptionStatus, Subscription};
use serde::Serialize;
use serde_json::Value;
use sqlx::AnyConnection;

use super::decode::Decoder;
use super::orgs::found;
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

/// A policy: a named group of rules.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRecord {
    /// Its id.
    pub id: String,
    /// The organization.
    pub org_id: String,
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// The rules it groups.
    pub rule_ids: Vec<String>,
    /// A template of the system organization.
    pub is_template: bool,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// One entry of the compliance check log.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckRecord {
    /// Its id.
    pub id: String,
    /// The organization.
    pub org_id: String,
    /// plugin or pipeline.
    pub target: String,
    /// The entity checked, when named.
    pub entity_id: Option<String>,
    /// pass, warn or block.
    pub result: String,
    /// The violations found.
    pub violations: Value,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// An organization's notification preference.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationPreference {
    /// E-mail notifications on.
    pub email_enabled: bool,
    /// Recipients; all org admins when unset.
    pub target_users: Option<Vec<String>>,
    /// The webhook, when set.
    pub webhook_url: Option<String>,
    /// Whether a webhook secret is stored (the secret itself is never returned).
    pub has_webhook_secret: bool,
    /// immediate, daily or weekly.
    pub digest_mode: String,
    /// Whether warnings notify too (blocks always do).
    pub notify_warnings: bool,
    /// Never returned: the stored secret (sealed when `SECRETS_ENCRYPTION_KEY` is set).
    #[serde(skip)]
    pub webhook_secret: Option<String>,
    /// When the webhook answered 410 Gone: off until its URL is saved again.
    pub webhook_disabled_at: Option<DateTime<Utc>>,
}

impl Default for NotificationPreference {
    /// The column defaults: nothing enabled, digest immediate.
    fn default() -> Self {
        NotificationPreference {
            email_enabled: false,
            target_users: None,
            webhook_url: None,
            has_webhook_secret: false,
            digest_mode: "immediate".to_owned(),
            notify_warnings: false,
            webhook_secret: None,
            webhook_disabled_at: None,
        }
    }
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

fn subscription_from_row(row: &sqlx::any::AnyRow) -> StoreResult<Subscription> {
    let d = Decoder::new(row, "subscriptions", &["rule_id"]);
    Ok(Subscription {
        rule_id: d.get("rule_id")?,
        active: d.flag("active")?,
        pinned_version: d.opt_u32("pinned_version")?,
    })
}

fn policy_from_row(row: &sqlx::any::AnyRow) -> StoreResult<PolicyRecord> {
    let d = Decoder::new(row, "policies", &["id"]);
    Ok(PolicyRecord {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        name: d.get("name")?,
        description: d.get("description")?,
        rule_ids: d.json("rule_ids")?,
        is_template: d.flag("is_template")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
    })
}

impl Store {
    /// An organization's subscriptions.
    pub async fn subscriptions(&self, org_id: &str) -> StoreResult<Vec<Subscription>> {
        let rows = sqlx::query(&self.sql("SELECT rule_id, active, pinned_version FROM subscriptions WHERE org_id = $1 ORDER BY created_at, rule_id"))
            .bind(org_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(subscription_from_row).collect()
    }

    /// A page of an organization's subscriptions (oldest first) and how many there are.
    pub async fn subscriptions_page(
        &self,
        org_id: &str,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<Subscription>, u64)> {
        let (rows, total) = self
            .page(
                (
                    "rule_id, active, pinned_version",
                    "subscriptions",
                    "org_id = $1",
                    "created_at, rule_id",
                ),
                &[Some(org_id.to_owned())],
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(subscription_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }

    /// Subscribes (inactive); a second subscription to the same rule is a conflict.
    pub async fn subscribe(
        &self,
        org_id: &str,
        rule_id: &str,
        now: DateTime<Utc>,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        sqlx::query(&self.sql(
            "INSERT INTO subscriptions (org_id, rule_id, active, pinned_version, created_at, updated_at) VALUES ($1, $2, 0, NULL, $3, $3)",
        ))
        .bind(org_id)
        .bind(rule_id)
        .bind(stamp(now))
        .execute(&mut *tx)
        .await
        .map_err(|e| match StoreError::from(e) {
            StoreError::Conflict(_) => StoreError::Conflict("already subscribed to that rule".to_owned()),
            other => other,
        })?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Subscribes (inactive) to each rule not yet subscribed; returns how many were new.
    pub async fn subscribe_missing(
        &self,
        org_id: &str,
        rule_ids: &[String],
        now: DateTime<Utc>,
        audit: &[AuditEvent],
    ) -> StoreResult<u64> {
        let mut tx = self.pool().begin().await?;
        let mut added = 0;
        for rule_id in rule_ids {
            let done = sqlx::query(&self.sql(
                "INSERT INTO subscriptions (org_id, rule_id, active, pinned_version, created_at, updated_at) VALUES ($1, $2, 0, NULL, $3, $3)
                 ON CONFLICT (org_id, rule_id) DO NOTHING",
            ))
            .bind(org_id)
            .bind(rule_id)
            .bind(stamp(now))
            .execute(&mut *tx)
            .await?;
            added += done.rows_affected();
        }
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(added)
    }

    /// Activates or deactivates subscriptions; every rule must be subscribed.
    pub async fn set_subscriptions_active(
        &self,
        org_id: &str,
        rule_ids: &[String],
        active: bool,
        now: DateTime<Utc>,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        for rule_id in rule_ids {
            let done = sqlx::query(&self.sql("UPDATE subscriptions SET active = $3, updated_at = $4 WHERE org_id = $1 AND rule_id = $2"))
                .bind(org_id)
                .bind(rule_id)
                .bind(i64::from(active))
                .bind(stamp(now))
                .execute(&mut *tx)
                .await?;
            found(
                done.rows_affected(),
                &format!("subscription to `{rule_id}`"),
            )?;
        }
        self.enqueue_subscription_change(&mut tx, org_id, rule_ids, now)
            .await?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Pins a subscription to a version, or unpins it (`None`).
    pub async fn pin_subscription(
        &self,
        org_id: &str,
        rule_id: &str,
        version: Option<u32>,
        now: DateTime<Utc>,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(&self.sql("UPDATE subscriptions SET pinned_version = $3, updated_at = $4 WHERE org_id = $1 AND rule_id = $2"))
            .bind(org_id)
            .bind(rule_id)
            .bind(version.map(i64::from))
            .bind(stamp(now))
            .execute(&mut *tx)
            .await?;
        found(done.rows_affected(), "subscription")?;
        self.enqueue_subscription_change(&mut tx, org_id, &[rule_id.to_owned()], now)
            .await?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes a subscription.
    pub async fn unsubscribe(
        &self,
        org_id: &str,
        rule_id: &str,
        audit: &[AuditEvent],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        let done =
            sqlx::query(&self.sql("DELETE FROM subscriptions WHERE org_id = $1 AND rule_id = $2"))
                .bind(org_id)
                .bind(rule_id)
                .execute(&mut *tx)
                .await?;
        found(done.rows_affected(), "subscription")?;
        self.enqueue_subscription_change(&mut tx, org_id, &[rule_id.to_owned()], now)
            .await?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Stores exemption requests, all or nothing.
    pub async fn request_exemptions(
        &self,
        org_id: &str,
        requests: &[NewExemption],
        by: &str,
        now: DateTime<Utc>,
        audit: &(dyn Fn(&[String]) -> Vec<AuditEvent> + Sync),
    ) -> StoreResult<Vec<String>> {
        let mut tx = self.pool().begin().await?;
        let mut ids = Vec::with_capacity(requests.len());
        for request in requests {
            let id = new_id();
            sqlx::query(&self.sql(
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
            .execute(&mut *tx)
            .await?;
            ids.push(id);
        }
        self.enqueue(&mut tx, &audit(&ids)).await?;
        tx.commit().await?;
        Ok(ids)
    }

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

    /// Moves an exemption from one of `transition.0` to `transition.1`, recording who.
    pub async fn set_exemption_status(
        &self,
        org_id: &str,
        id: &str,
        (from, to): (&[ExemptionStatus], ExemptionStatus),
        (by, note): (&str, Option<&str>),
        now: DateTime<Utc>,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        let allowed: Vec<String> = from
            .iter()
            .map(|s| format!("'{}'", status_name(*s)))
            .collect();
        let done = sqlx::query(&self.sql(&format!(
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
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Conflict(format!(
                "the exemption cannot become {}",
                status_name(to)
            )));
        }
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Creates a policy.
    pub async fn create_policy(
        &self,
        org_id: &str,
        (name, description): (&str, Option<&str>),
        rule_ids: &[String],
        is_template: bool,
        now: DateTime<Utc>,
        audit: &(dyn Fn(&str) -> Vec<AuditEvent> + Sync),
    ) -> StoreResult<PolicyRecord> {
        let id = new_id();
        let mut tx = self.pool().begin().await?;
        self.insert_policy(
            &mut tx,
            &id,
            org_id,
            (name, description),
            rule_ids,
            is_template,
            now,
        )
        .await?;
        self.enqueue(&mut tx, &audit(&id)).await?;
        tx.commit().await?;
        self.policy(org_id, &id)
            .await?
            .ok_or_else(|| StoreError::Other("the new policy vanished".to_owned()))
    }

    /// The statement of [`Store::create_policy`], in the caller's transaction.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn insert_policy(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        id: &str,
        org_id: &str,
        (name, description): (&str, Option<&str>),
        rule_ids: &[String],
        is_template: bool,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO policies (id, org_id, name, description, rule_ids, is_template, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
        ))
        .bind(id)
        .bind(org_id)
        .bind(name)
        .bind(description)
        .bind(serde_json::to_string(rule_ids).unwrap_or_default())
        .bind(i64::from(is_template))
        .bind(stamp(now))
        .execute(&mut **tx)
        .await
        .map_err(|e| match StoreError::from(e) {
            StoreError::Conflict(_) => StoreError::Conflict(format!("a policy named `{name}` already exists")),
            other => other,
        })?;
        Ok(())
    }

    /// One policy of an organization.
    pub async fn policy(&self, org_id: &str, id: &str) -> StoreResult<Option<PolicyRecord>> {
        let row = sqlx::query(&self.sql("SELECT * FROM policies WHERE org_id = $1 AND id = $2"))
            .bind(org_id)
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(policy_from_row).transpose()
    }

    /// A page of an organization's policies (or templates), filtered by name.
    pub async fn policies(
        &self,
        org_id: &str,
        name: Option<&str>,
        templates: Option<bool>,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<PolicyRecord>, u64)> {
        let pattern = name.map(|n| format!("%{}%", n.to_lowercase().replace(['%', '_'], "")));
        let condition = match templates {
            None => "org_id = $1 AND ($2 IS NULL OR lower(name) LIKE $2)",
            Some(true) => "org_id = $1 AND ($2 IS NULL OR lower(name) LIKE $2) AND is_template = 1",
            Some(false) => {
                "org_id = $1 AND ($2 IS NULL OR lower(name) LIKE $2) AND is_template = 0"
            }
        };
        let binds = [Some(org_id.to_owned()), pattern];
        let (rows, total) = self
            .page(
                ("*", "policies", condition, "created_at DESC, id DESC"),
                &binds,
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(policy_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }

    /// Updates a policy.
    pub async fn update_policy(
        &self,
        org_id: &str,
        id: &str,
        (name, description, rule_ids): (Option<&str>, Option<&str>, Option<&[String]>),
        now: DateTime<Utc>,
        audit: &[AuditEvent],
    ) -> StoreResult<PolicyRecord> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(&self.sql(
            "UPDATE policies SET name = COALESCE($3, name), description = COALESCE($4, description), rule_ids = COALESCE($5, rule_ids), updated_at = $6
             WHERE org_id = $1 AND id = $2",
        ))
        .bind(org_id)
        .bind(id)
        .bind(name)
        .bind(description)
        .bind(rule_ids.map(|r| serde_json::to_string(r).unwrap_or_default()))
        .bind(stamp(now))
        .execute(&mut *tx)
        .await
        .map_err(|e| match StoreError::from(e) {
            StoreError::Conflict(_) => StoreError::Conflict("a policy with that name already exists".to_owned()),
            other => other,
        })?;
        found(done.rows_affected(), "policy")?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        self.policy(org_id, id)
            .await?
            .ok_or_else(|| StoreError::NotFound("policy".to_owned()))
    }

    /// Deletes a policy.
    pub async fn delete_policy(
        &self,
        org_id: &str,
        id: &str,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(&self.sql("DELETE FROM policies WHERE org_id = $1 AND id = $2"))
            .bind(org_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        found(done.rows_affected(), "policy")?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records a live check in one transaction: its check-log row, the entity's
    /// snapshot (for the impact preview), and the notification it calls for, if any
    /// (so a crash never loses one, and a rolled-back check never sends one).
    #[allow(clippy::too_many_arguments)]
    pub async fn record_live_check(
        &self,
        (org_id, target, entity_id): (&str, &str, Option<&str>),
        result: &str,
        violations: &Value,
        snapshot: Option<&Value>,
        notification: Option<&super::NewNotification>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<String>> {
        let mut tx = self.pool().begin().await?;
        sqlx::query(&self.sql(
            "INSERT INTO compliance_checks (id, org_id, target, entity_id, result, violations, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        ))
        .bind(new_id())
        .bind(org_id)
        .bind(target)
        .bind(entity_id)
        .bind(result)
        .bind(violations.to_string())
        .bind(stamp(now))
        .execute(&mut *tx)
        .await?;
        if let (Some(entity_id), Some(snapshot)) = (entity_id, snapshot) {
            self.put_snapshot(&mut tx, (org_id, target, entity_id), snapshot, now)
                .await?;
        }
        let id = match notification {
            Some(n) => Some(self.insert_notification(&mut tx, org_id, n, now).await?),
            None => None,
        };
        tx.commit().await?;
        Ok(id)
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
            "INSERT INTO entity_snapshots (org_id, target, entity_id, attributes, updated_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (org_id, target, entity_id) DO UPDATE SET attributes = excluded.attributes, updated_at = excluded.updated_at",
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
        let condition = "org_id = $1 AND ($2 IS NULL OR target = $2) AND ($3 IS NULL OR result = $3) AND ($4 IS NULL OR entity_id = $4)";
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
                    target: d.get("target")?,
                    entity_id: d.get("entity_id")?,
                    result: d.get("result")?,
                    violations: d.json("violations")?,
                    created_at: d.stamp("created_at")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }

    /// Deletes check-log entries older than `cutoff`.
    pub async fn prune_checks(&self, cutoff: DateTime<Utc>) -> StoreResult<u64> {
        let done = sqlx::query(&self.sql("DELETE FROM compliance_checks WHERE created_at < $1"))
            .bind(stamp(cutoff))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }

    /// An organization's preference, or the column defaults.
    pub async fn notification_preference(
        &self,
        org_id: &str,
    ) -> StoreResult<NotificationPreference> {
        let row =
            sqlx::query(&self.sql("SELECT * FROM notification_preferences WHERE org_id = $1"))
                .bind(org_id)
                .fetch_optional(self.pool())
                .await?;
        let Some(row) = row else {
            return Ok(NotificationPreference::default());
        };
        let d = Decoder::new(&row, "notification_preferences", &["org_id"]);
        let secret: Option<String> = d.get("webhook_secret")?;
        Ok(NotificationPreference {
            email_enabled: d.flag("email_enabled")?,
            target_users: d.opt_json("target_users")?,
            webhook_url: d.get("webhook_url")?,
            has_webhook_secret: secret.as_deref().is_some_and(|s| !s.is_empty()),
            digest_mode: d.get("digest_mode")?,
            notify_warnings: d.flag("notify_warnings")?,
            webhook_secret: secret,
            webhook_disabled_at: d.opt_stamp("webhook_disabled_at")?,
        })
    }

    /// Stores an organization's preference (upsert).
    pub async fn save_notification_preference(
        &self,
        org_id: &str,
        p: &NotificationPreference,
        now: DateTime<Utc>,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        sqlx::query(&self.sql(
            "INSERT INTO notification_preferences (org_id, email_enabled, target_users, webhook_url, webhook_secret, digest_mode, notify_warnings, updated_at, webhook_disabled_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (org_id) DO UPDATE SET email_enabled = excluded.email_enabled, target_users = excluded.target_users,
               webhook_url = excluded.webhook_url, webhook_secret = excluded.webhook_secret, digest_mode = excluded.digest_mode,
               notify_warnings = excluded.notify_warnings, updated_at = excluded.updated_at,
               webhook_disabled_at = excluded.webhook_disabled_at",
        ))
        .bind(org_id)
        .bind(i64::from(p.email_enabled))
        .bind(p.target_users.as_ref().map(|t| serde_json::to_string(t).unwrap_or_default()))
        .bind(&p.webhook_url)
        .bind(&p.webhook_secret)
        .bind(&p.digest_mode)
        .bind(i64::from(p.notify_warnings))
        .bind(stamp(now))
        .bind(p.webhook_disabled_at.map(stamp))
        .execute(&mut *tx)
        .await?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }
}

impl Store {
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

impl super::Transaction<'_> {
    /// [`Store::create_policy`] as a step of this transaction; answers the new id.
    pub async fn create_policy(
        &mut self,
        org_id: &str,
        (name, description): (&str, Option<&str>),
        rule_ids: &[String],
        now: DateTime<Utc>,
        audit: &(dyn Fn(&str) -> Vec<AuditEvent> + Sync),
    ) -> StoreResult<String> {
        let id = new_id();
        self.store
            .insert_policy(
                &mut self.tx,
                &id,
                org_id,
                (name, description),
                rule_ids,
                false,
                now,
            )
            .await?;
        self.store.enqueue(&mut self.tx, &audit(&id)).await?;
        Ok(id)
    }
}
