//! An organization's life after delete: soft delete (with its teams), restore to
//! exactly the state it left, and the purge of what is past the restore window. The
//! audit chain is never purged here (its own retention prunes it).

use chrono::{DateTime, Utc};
use sqlx::AnyConnection;

use super::decode::Decoder;
use super::orgs::{org_from_row, ORG_COLUMNS};
use super::{stamp, OrgRecord, Store, StoreError, StoreResult, Transaction};

/// A soft-deleted organization, and when it was deleted.
#[derive(Debug, Clone)]
pub struct DeletedOrg {
    /// The organization as it was.
    pub org: OrgRecord,
    /// When it was deleted (its teams deleted with it carry the same instant).
    pub deleted_at: DateTime<Utc>,
}

/// The tables that hold an organization's data, children before parents; the
/// audit chain's tables are not among them.
const ORG_TABLES: [&str; 49] = [
    "dashboards",
    "alert_rule_destinations",
    "alert_history",
    "alert_rules",
    "alert_destinations",
    "alert_test_windows",
    "posture_snapshots",
    "ai_places",
    "ai_place_locks",
    "role_members",
    "memberships",
    "roles",
    "invitations",
    "subscriptions",
    "policies",
    "exemptions",
    "compliance_checks",
    "notification_preferences",
    "entity_snapshots",
    "denial_folds",
    "pipeline_registry",
    "report_executions",
    "report_stages",
    "plugin_build_attempts",
    "pipelines",
    "quota_usage",
    "reevaluation_queue",
    "plugin_builds",
    "plugins",
    "scan_results",
    "scans",
    "scan_schedules",
    "deliveries",
    "notification_log",
    "notifications",
    "digests",
    "messages",
    "quota_overrides",
    "quota_increments",
    "billing_subscriptions",
    "rules",
    "org_sso_policies",
    "org_break_glass",
    "org_domains",
    "org_idp_configs",
    "org_ai_settings",
    "org_ai_tokens",
    "org_exports",
    "organizations",
];

impl Store {
    /// A soft-deleted organization (not yet purged).
    pub async fn deleted_organization(&self, id: &str) -> StoreResult<Option<DeletedOrg>> {
        let row = sqlx::query(&self.sql(&format!(
            "SELECT {ORG_COLUMNS}, deleted_at FROM organizations WHERE id = $1 AND deleted_at IS NOT NULL"
        )))
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref()
            .map(|row| {
                Ok(DeletedOrg {
                    org: org_from_row(row)?,
                    deleted_at: Decoder::new(row, "organizations", &["id"]).stamp("deleted_at")?,
                })
            })
            .transpose()
    }

    /// Takes a team's usage out of its root's pool (`-`) or puts it back (`+`), for
    /// the period each pool row counts; nothing for a root.
    async fn move_team_usage(
        &self,
        conn: &mut AnyConnection,
        team_id: &str,
        sign: &str,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(&format!(
            "UPDATE quota_pool SET used = used {sign} COALESCE((SELECT u.used FROM quota_usage u \
               WHERE u.org_id = $1 AND u.dimension = quota_pool.dimension \
                 AND COALESCE(u.period_start, '') = COALESCE(quota_pool.period_start, '')), 0) \
             WHERE root_id = (SELECT parent_org_id FROM organizations WHERE id = $1)"
        )))
        .bind(team_id)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// The organizations deleted before `cutoff` (teams before their roots).
    pub async fn organizations_deleted_before(
        &self,
        cutoff: DateTime<Utc>,
    ) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(&self.sql(
            "SELECT id FROM organizations WHERE deleted_at IS NOT NULL AND deleted_at < $1 \
             ORDER BY parent_org_id IS NULL, id",
        ))
        .bind(stamp(cutoff))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| Decoder::new(row, "organizations", &["id"]).get("id"))
            .collect()
    }
}

impl super::Transaction<'_> {
    /// Soft-deletes an organization and its teams (one instant for all), in one
    /// transaction: a team's usage leaves its root's pool, running scans end
    /// (`cancelled`), and `audit` is written. Already deleted (a race lost): 409.
    pub async fn delete_organization(&mut self, id: &str, now: DateTime<Utc>) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE organizations SET deleted_at = $2 WHERE (id = $1 OR parent_org_id = $1) AND deleted_at IS NULL",
        ))
        .bind(id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Conflict(
                "the organization is already deleted".to_owned(),
            ));
        }
        self.store.move_team_usage(&mut self.tx, id, "-").await?;
        sqlx::query(&self.store.sql(
            "UPDATE scans SET status = 'cancelled', error = 'the organization was deleted', \
             ended_at = $2, updated_at = $2, holder = NULL, lease_until = NULL \
             WHERE status = 'running' AND org_id IN (SELECT id FROM organizations WHERE id = $1 OR parent_org_id = $1)",
        ))
        .bind(id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Restores an organization and the teams deleted with it (the same instant), as
    /// they were (nothing else of their rows changes), in one transaction: a team's
    /// usage comes back to its root's pool, and `audit` is written. Restored
    /// meanwhile (a race lost): 409; a name another organization took meanwhile: the
    /// uniqueness conflict.
    pub async fn restore_organization(&mut self, deleted: &DeletedOrg) -> StoreResult<()> {
        let id = deleted.org.id.as_str();

        let done = sqlx::query(&self.store.sql(
            "UPDATE organizations SET deleted_at = NULL \
             WHERE (id = $1 OR parent_org_id = $1) AND deleted_at = $2",
        ))
        .bind(id)
        .bind(stamp(deleted.deleted_at))
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Conflict(
                "the organization is not deleted any more".to_owned(),
            ));
        }
        self.store.move_team_usage(&mut self.tx, id, "+").await?;
        Ok(())
    }
}

/// Steps of the workers' and services' units of work.
impl Transaction<'_> {
    /// Purges a deleted organization: all its data but its audit chain.
    pub async fn purge_organization(&mut self, id: &str) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "DELETE FROM rule_versions WHERE rule_id IN (SELECT id FROM rules WHERE org_id = $1)",
        ))
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(&self.store.sql(
            "DELETE FROM plugin_archives WHERE plugin_id IN (SELECT id FROM plugins WHERE org_id = $1)",
        ))
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(&self.store.sql(
            "DELETE FROM billing_addons WHERE subscription_id IN (SELECT id FROM billing_subscriptions WHERE org_id = $1)",
        ))
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(&self.store.sql("DELETE FROM quota_pool WHERE root_id = $1"))
            .bind(id)
            .execute(&mut *self.tx)
            .await?;
        // Its conversations, and the announcements its admins posted.
        for statement in [
            "DELETE FROM org_export_chunks WHERE export_id IN (SELECT id FROM org_exports WHERE org_id = $1)",
            "DELETE FROM conversation_participants WHERE conversation_id IN (SELECT id FROM conversations WHERE org_id = $1)",
            "DELETE FROM conversation_messages WHERE org_id = $1",
            "DELETE FROM conversations WHERE org_id = $1",
            "DELETE FROM announcement_dismissals WHERE announcement_id IN (SELECT id FROM announcements WHERE org_id = $1)",
            "DELETE FROM announcement_targets WHERE announcement_id IN (SELECT id FROM announcements WHERE org_id = $1)",
            "DELETE FROM announcement_targets WHERE org_id = $1",
            "DELETE FROM announcements WHERE org_id = $1",
            // The events of its executions go with them: a resource name it
            // held, registered later by another organization, never brings
            // them back as that organization's.
            "DELETE FROM report_pending WHERE EXISTS (SELECT 1 FROM report_executions x \
               WHERE x.org_id = $1 AND x.resource = report_pending.resource AND x.execution_id = report_pending.execution_id)",
            "DELETE FROM report_events WHERE EXISTS (SELECT 1 FROM report_executions x \
               WHERE x.org_id = $1 AND x.resource = report_events.resource AND x.execution_id = report_events.execution_id)",
        ] {
            sqlx::query(&self.store.sql(statement))
                .bind(id)
                .execute(&mut *self.tx)
                .await?;
        }
        for table in ORG_TABLES {
            let column = if table == "organizations" {
                "id"
            } else {
                "org_id"
            };
            sqlx::query(
                &self
                    .store
                    .sql(&format!("DELETE FROM {table} WHERE {column} = $1")),
            )
            .bind(id)
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(())
    }
}
