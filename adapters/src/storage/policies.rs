//! Policies: named sets of rules, and templates, always scoped by organization.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::decode::Decoder;
use super::orgs::found;
use super::{stamp, taken, Store, StoreResult};

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

impl super::Transaction<'_> {
    /// Inserts a policy (a name taken in the organization is a conflict).
    pub async fn insert_policy(
        &mut self,
        (id, org_id): (&str, &str),
        (name, description): (&str, Option<&str>),
        rule_ids: &[String],
        is_template: bool,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO policies (id, org_id, name, description, rule_ids, is_template, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
        ))
        .bind(id)
        .bind(org_id)
        .bind(name)
        .bind(description)
        .bind(serde_json::to_string(rule_ids).unwrap_or_default())
        .bind(i64::from(is_template))
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| format!("a policy named `{name}` already exists")))?;
        Ok(())
    }

    /// Changes the fields given (`None` keeps one); `NotFound` when the organization
    /// has no such policy.
    pub async fn update_policy(
        &mut self,
        (org_id, id): (&str, &str),
        (name, description, rule_ids): (Option<&str>, Option<&str>, Option<&[String]>),
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE policies SET name = COALESCE($3, name), description = COALESCE($4, description), rule_ids = COALESCE($5, rule_ids), updated_at = $6
             WHERE org_id = $1 AND id = $2",
        ))
        .bind(org_id)
        .bind(id)
        .bind(name)
        .bind(description)
        .bind(rule_ids.map(|r| serde_json::to_string(r).unwrap_or_default()))
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| "a policy with that name already exists"))?;
        found(done.rows_affected(), "policy")
    }

    /// Deletes a policy; `NotFound` when the organization has no such policy.
    pub async fn delete_policy(&mut self, org_id: &str, id: &str) -> StoreResult<()> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM policies WHERE org_id = $1 AND id = $2"),
        )
        .bind(org_id)
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        found(done.rows_affected(), "policy")
    }

    /// One policy of an organization, as the transaction sees it.
    pub async fn policy(&mut self, org_id: &str, id: &str) -> StoreResult<Option<PolicyRecord>> {
        let row = sqlx::query(
            &self
                .store
                .sql("SELECT * FROM policies WHERE org_id = $1 AND id = $2"),
        )
        .bind(org_id)
        .bind(id)
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(policy_from_row).transpose()
    }
}

impl Store {
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
}
