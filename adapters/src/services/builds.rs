//! The build queue as admins see it: counts, failed builds, the dead letter queue,
//! replay (tenant-checked) and purge (super-admins). A super-admin sees every
//! organization's jobs; an organization's admin sees its own.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::{ServiceError, ServiceResult};
use crate::services::context::{event, Caller};
pub use crate::storage::BuildJob as BuildJobRecord;
use crate::storage::{unit_of_work, OrgRecord, Store};

fn scope(org: &OrgRecord, super_admin: bool) -> Option<&str> {
    (!super_admin).then_some(org.id.as_str())
}

/// Job counts by queue and status: (queue, status, count).
pub async fn status(
    store: &Store,
    org: &OrgRecord,
    super_admin: bool,
) -> ServiceResult<Vec<(String, String, u64)>> {
    Ok(store.build_counts(scope(org, super_admin)).await?)
}

/// A page of failed builds, or of dead letters: (jobs, total).
pub async fn jobs(
    store: &Store,
    (org, super_admin): (&OrgRecord, bool),
    dead_letters: bool,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<BuildJobRecord>, u64)> {
    Ok(store
        .builds(scope(org, super_admin), dead_letters, limit, offset)
        .await?)
}

/// Replays a dead letter of the organization (any, for a super-admin): a new build
/// of the plugin in the dead letter queue.
pub async fn replay(
    store: &Store,
    (org, super_admin): (&OrgRecord, bool),
    job_id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<BuildJobRecord> {
    unit_of_work!(store, |tx| {
        Ok(tx
            .replay_build(scope(org, super_admin), job_id, now)
            .await?)
    })?
    .ok_or(ServiceError::NotFound("dead letter".into()))
}

/// Purges every dead letter, audited `plugin.dlq.purge` in the system organization's
/// chain; answers how many.
pub async fn purge(store: &Store, caller: &Caller, now: DateTime<Utc>) -> ServiceResult<u64> {
    let system = store
        .system_organization()
        .await?
        .ok_or(ServiceError::Forbidden("there is no system organization"))?;
    unit_of_work!(store, |tx| {
        let purged = tx.purge_dead_letters(now).await?;
        tx.enqueue_audit(&[event(
            caller,
            "plugin.dlq.purge",
            &system.id,
            "queue",
            "dlq",
            json!({"purged": purged}),
        )])
        .await?;
        Ok(purged)
    })
}
