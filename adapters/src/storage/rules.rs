//! Compliance rules and their versions, always scoped by organization.

use chrono::{DateTime, Utc};
use compliance_core::Rule;
use serde::Serialize;
use serde_json::Value;

use super::decode::Decoder;
use super::orgs::found;
use super::{stamp, taken, Store, StoreResult};

/// A rule as stored, with its owner and timestamps.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredRule {
    /// The rule, in the API's form.
    #[serde(flatten)]
    pub rule: Rule,
    /// The owning organization.
    pub org_id: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
    /// When it was soft-deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<DateTime<Utc>>,
}

/// One entry of a rule's change history.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleChange {
    /// The version this change produced.
    pub version: u32,
    /// create, update or delete, and the fields that changed.
    pub change: Value,
    /// Who changed it.
    pub changed_by: String,
    /// When.
    pub changed_at: DateTime<Utc>,
    /// The rule as it was after the change.
    pub rule: Value,
}

/// Filters of `GET /compliance/rules` and the catalog.
#[derive(Debug, Clone, Default)]
pub struct RuleFilter {
    /// plugin or pipeline.
    pub target: Option<String>,
    /// warning, error or critical.
    pub severity: Option<String>,
    /// org or published.
    pub scope: Option<String>,
    /// A tag the rule carries.
    pub tag: Option<String>,
    /// A case-insensitive part of the name.
    pub name: Option<String>,
    /// Templates only (true), or no templates (false).
    pub is_template: Option<bool>,
    /// Include soft-deleted rules.
    pub include_deleted: bool,
}

const COLUMNS: &str = "id, org_id, body, version, created_at, updated_at, deleted_at";

fn stored_from_row(row: &sqlx::any::AnyRow) -> StoreResult<StoredRule> {
    let d = Decoder::new(row, "rules", &["id"]);
    let mut rule: Rule = d.json("body")?;
    rule.id = d.get("id")?;
    rule.version = d.u32("version")?;
    Ok(StoredRule {
        rule,
        org_id: d.get("org_id")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
        deleted_at: d.opt_stamp("deleted_at")?,
    })
}

fn scope_name(rule: &Rule) -> &'static str {
    match rule.scope {
        compliance_core::Scope::Org => "org",
        compliance_core::Scope::Published => "published",
    }
}

fn body(rule: &Rule) -> String {
    serde_json::to_string(rule).unwrap_or_else(|_| "{}".to_owned())
}

impl Store {
    /// Stores a new rule (its id and version 1 already set) and its first history
    /// entry, in the caller's transaction.
    pub(crate) async fn insert_rule(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        org_id: &str,
        rule: &Rule,
        by: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO rules (id, org_id, name, target, severity, scope, is_template, propagate_to_children, tags, body, version, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)",
        ))
        .bind(&rule.id)
        .bind(org_id)
        .bind(&rule.name)
        .bind(rule.target.as_str())
        .bind(severity_name(rule))
        .bind(scope_name(rule))
        .bind(i64::from(rule.is_template))
        .bind(i64::from(rule.propagate_to_children))
        .bind(serde_json::to_string(&rule.tags).unwrap_or_default())
        .bind(body(rule))
        .bind(i64::from(rule.version))
        .bind(stamp(now))
        .execute(&mut **tx)
        .await
        .map_err(taken(|| format!("a rule named `{}` already exists", rule.name)))?;
        self.record_version(tx, rule, &serde_json::json!({"action": "create"}), by, now)
            .await?;
        self.enqueue_rule_change(
            tx,
            (org_id, &rule.id, rule.target.as_str()),
            "rule.create",
            now,
        )
        .await?;
        Ok(())
    }

    async fn record_version(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        rule: &Rule,
        change: &Value,
        by: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO rule_versions (rule_id, version, body, change, changed_by, changed_at) VALUES ($1, $2, $3, $4, $5, $6)",
        ))
        .bind(&rule.id)
        .bind(i64::from(rule.version))
        .bind(body(rule))
        .bind(change.to_string())
        .bind(by)
        .bind(stamp(now))
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// One rule of an organization.
    pub async fn rule(
        &self,
        org_id: &str,
        id: &str,
        include_deleted: bool,
    ) -> StoreResult<Option<StoredRule>> {
        let deleted = if include_deleted {
            ""
        } else {
            " AND deleted_at IS NULL"
        };
        let row = sqlx::query(&self.sql(&format!(
            "SELECT {COLUMNS} FROM rules WHERE org_id = $1 AND id = $2{deleted}"
        )))
        .bind(org_id)
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(stored_from_row).transpose()
    }

    /// A published rule (of any organization; only the system organization publishes).
    pub async fn published_rule(&self, id: &str) -> StoreResult<Option<StoredRule>> {
        let row = sqlx::query(&self.sql(&format!(
            "SELECT {COLUMNS} FROM rules WHERE id = $1 AND scope = 'published' AND deleted_at IS NULL"
        )))
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(stored_from_row).transpose()
    }

    /// A page of rules matching `filter`: one organization's, or (org `None`) the catalog.
    pub async fn rules(
        &self,
        org_id: Option<&str>,
        filter: &RuleFilter,
        limit: u32,
        offset: u64,
        ascending: bool,
    ) -> StoreResult<(Vec<StoredRule>, u64)> {
        let mut clauses: Vec<String> = Vec::new();
        let mut binds: Vec<String> = Vec::new();
        let mut add = |clause: &str, value: String| {
            binds.push(value);
            clauses.push(clause.replace('#', &format!("${}", binds.len())));
        };
        if let Some(org) = org_id {
            add("org_id = #", org.to_owned());
        }
        if let Some(v) = &filter.target {
            add("target = #", v.clone());
        }
        if let Some(v) = &filter.severity {
            add("severity = #", v.clone());
        }
        if let Some(v) = &filter.scope {
            add("scope = #", v.clone());
        }
        if let Some(v) = &filter.tag {
            add(
                "tags LIKE #",
                format!(
                    "%{}%",
                    serde_json::to_string(v)
                        .unwrap_or_default()
                        .replace(['%', '_'], "")
                ),
            );
        }
        if let Some(v) = &filter.name {
            add(
                "lower(name) LIKE #",
                format!("%{}%", v.to_lowercase().replace(['%', '_'], "")),
            );
        }
        let mut condition = if clauses.is_empty() {
            "1 = 1".to_owned()
        } else {
            clauses.join(" AND ")
        };
        if let Some(t) = filter.is_template {
            condition.push_str(if t {
                " AND is_template = 1"
            } else {
                " AND is_template = 0"
            });
        }
        if !filter.include_deleted {
            condition.push_str(" AND deleted_at IS NULL");
        }
        let order = if ascending { "ASC" } else { "DESC" };
        let binds: Vec<Option<String>> = binds.into_iter().map(Some).collect();
        let order_by = format!("created_at {order}, id {order}");
        let (rows, total) = self
            .page(
                (COLUMNS, "rules", &condition, &order_by),
                &binds,
                limit,
                offset,
            )
            .await?;
        let rules = rows
            .iter()
            .map(stored_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((rules, total))
    }

    /// Every live rule of an organization, for its effective set.
    pub async fn org_rules(&self, org_id: &str) -> StoreResult<Vec<Rule>> {
        let rows = sqlx::query(&self.sql(&format!(
            "SELECT {COLUMNS} FROM rules WHERE org_id = $1 AND deleted_at IS NULL"
        )))
        .bind(org_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| stored_from_row(r).map(|s| s.rule))
            .collect()
    }

    /// A rule's history, oldest first.
    pub async fn rule_history(&self, org_id: &str, id: &str) -> StoreResult<Vec<RuleChange>> {
        let rows = sqlx::query(&self.sql(
            "SELECT v.version, v.body, v.change, v.changed_by, v.changed_at FROM rule_versions v
             JOIN rules r ON r.id = v.rule_id WHERE r.org_id = $1 AND v.rule_id = $2 ORDER BY v.version",
        ))
        .bind(org_id)
        .bind(id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "rule_versions", &["rule_id", "version"]);
                Ok(RuleChange {
                    version: d.u32("version")?,
                    change: d.json::<Value>("change")?,
                    changed_by: d.get("changed_by")?,
                    changed_at: d.stamp("changed_at")?,
                    rule: d.json::<Value>("body")?,
                })
            })
            .collect()
    }

    /// Every stored version of the published rules `ids`, for pinned subscriptions.
    pub async fn published_versions(&self, ids: &[String]) -> StoreResult<Vec<Rule>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // One query for every rule: `IN ($1, ..., $n)`.
        let placeholders: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
        let sql = self.sql(&format!(
            "SELECT v.rule_id, v.version, v.body FROM rule_versions v JOIN rules r ON r.id = v.rule_id
             WHERE v.rule_id IN ({}) AND r.scope = 'published' AND r.deleted_at IS NULL",
            placeholders.join(", ")
        ));
        let mut query = sqlx::query(&sql);
        for id in ids {
            query = query.bind(id);
        }
        let mut out = Vec::new();
        for row in query.fetch_all(self.pool()).await? {
            // A version that does not decode fails the whole load: a subscriber's rule
            // set is never computed without one of its rules (fail closed).
            let d = Decoder::new(&row, "rule_versions", &["rule_id", "version"]);
            let mut rule: Rule = d.json("body")?;
            rule.id = d.get("rule_id")?;
            rule.version = d.u32("version")?;
            if rule.scope == compliance_core::Scope::Published {
                out.push(rule);
            }
        }
        Ok(out)
    }
}

fn severity_name(rule: &Rule) -> &'static str {
    match rule.severity {
        compliance_core::Severity::Warning => "warning",
        compliance_core::Severity::Error => "error",
        compliance_core::Severity::Critical => "critical",
    }
}

impl super::Transaction<'_> {
    /// Stores a new rule (its id and version 1 already set) and its first history
    /// entry.
    pub async fn create_rule(
        &mut self,
        org_id: &str,
        rule: &Rule,
        by: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.store
            .insert_rule(&mut self.tx, org_id, rule, by, now)
            .await
    }

    /// Replaces a rule (its version already bumped) and records the change; a rule
    /// moved from `previous_target` to another re-judges both targets.
    pub async fn update_rule(
        &mut self,
        (org_id, rule): (&str, &Rule),
        previous_target: &str,
        change: &Value,
        by: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql(
                "UPDATE rules SET name = $3, target = $4, severity = $5, scope = $6, is_template = $7, propagate_to_children = $8,
                    tags = $9, body = $10, version = $11, updated_at = $12
                 WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL",
            ))
            .bind(org_id)
            .bind(&rule.id)
            .bind(&rule.name)
            .bind(rule.target.as_str())
            .bind(severity_name(rule))
            .bind(scope_name(rule))
            .bind(i64::from(rule.is_template))
            .bind(i64::from(rule.propagate_to_children))
            .bind(serde_json::to_string(&rule.tags).unwrap_or_default())
            .bind(body(rule))
            .bind(i64::from(rule.version))
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await
            .map_err(taken(|| format!("a rule named `{}` already exists", rule.name)))?;
        found(done.rows_affected(), "rule")?;
        self.store
            .record_version(&mut self.tx, rule, change, by, now)
            .await?;
        self.store
            .enqueue_rule_change(
                &mut self.tx,
                (org_id, &rule.id, rule.target.as_str()),
                "rule.update",
                now,
            )
            .await?;
        if let Some(old) = Some(previous_target).filter(|t| *t != rule.target.as_str()) {
            self.store
                .enqueue_rule_change(&mut self.tx, (org_id, &rule.id, old), "rule.update", now)
                .await?;
        }
        Ok(())
    }

    /// Soft-deletes a rule; the deletion is its last version.
    pub async fn delete_rule(
        &mut self,
        org_id: &str,
        rule: &Rule,
        by: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE rules SET deleted_at = $3, version = $4, updated_at = $3 WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL",
        ))
        .bind(org_id)
        .bind(&rule.id)
        .bind(stamp(now))
        .bind(i64::from(rule.version))
        .execute(&mut *self.tx)
        .await?;
        found(done.rows_affected(), "rule")?;
        self.store
            .record_version(
                &mut self.tx,
                rule,
                &serde_json::json!({"action": "delete"}),
                by,
                now,
            )
            .await?;
        self.store
            .enqueue_rule_change(
                &mut self.tx,
                (org_id, &rule.id, rule.target.as_str()),
                "rule.delete",
                now,
            )
            .await?;
        Ok(())
    }
}
