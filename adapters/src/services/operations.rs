//! What the operational endpoints report (whether the database answers, how far the
//! audit outbox is behind), and the migrations a process applies when it starts.

use std::time::Duration;

use chrono::Utc;

use super::{ServiceError, ServiceResult};
use crate::replica::ReplicaState;
use crate::storage::{new_id, OutboxDepth, QueueDepth, Store};

/// The database answers and the process is not stopping.
pub async fn ready(store: &Store, replica: &ReplicaState) -> ServiceResult<()> {
    if replica.is_draining() {
        return Err(ServiceError::Stopping);
    }
    Ok(store.ping().await?)
}

/// How many of the server's own audit events wait to be chained, and since when.
pub async fn outbox(store: &Store) -> ServiceResult<OutboxDepth> {
    Ok(store.outbox_depth().await?)
}

/// How many re-evaluation events wait, how many are dead, and since when.
pub async fn reevaluation(store: &Store) -> ServiceResult<QueueDepth> {
    Ok(store.reevaluation_depth().await?)
}

/// Reporting: resource names waiting for a registration, and their executions.
pub async fn unattributed(store: &Store) -> ServiceResult<(i64, i64)> {
    Ok(store.unattributed_counts().await?)
}

/// How long the migration lease lasts unless renewed (a process that dies while
/// migrating holds it no longer).
const MIGRATION_LEASE: Duration = Duration::from_secs(30);
/// How long a process waits for another's migrations.
const MIGRATION_WAIT: Duration = Duration::from_secs(600);

/// Applies the migrations of the store's backend under a lease of their own (a row of
/// `migration_lease`, renewed while they run) rather than sqlx's session advisory
/// lock: one process migrates at a time, through a pooler in transaction mode too (on
/// a session of the database itself). Another process waits for the lease (at most
/// [`MIGRATION_WAIT`]), then finds nothing left to apply.
pub async fn migrate(store: &Store) -> ServiceResult<()> {
    if let Some(session) = store.migration_session().await? {
        let migrated = Box::pin(migrate(&session)).await;
        session.close().await;
        return migrated;
    }
    let holder = new_id();
    take_lease(store, &holder).await?;
    let renewal = {
        let (store, holder) = (store.clone(), holder.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(MIGRATION_LEASE / 3).await;
                if let Err(error) = store.renew_migration_lease(&holder, lease_end()).await {
                    tracing::warn!(%error, "the migration lease was not renewed");
                }
            }
        })
    };
    let applied = store.apply_migrations().await;
    renewal.abort();
    let released = store.release_migration_lease(&holder).await;
    applied?;
    Ok(released?)
}

/// When a lease taken or renewed now ends.
fn lease_end() -> chrono::DateTime<Utc> {
    Utc::now() + chrono::Duration::from_std(MIGRATION_LEASE).unwrap_or_default()
}

/// Waits for the migration lease (at most [`MIGRATION_WAIT`]).
async fn take_lease(store: &Store, holder: &str) -> ServiceResult<()> {
    // Two processes creating the table at once: one of them may see the other's
    // half-made table as a conflict; the second try finds it made.
    if store.create_migration_lease().await.is_err() {
        tokio::time::sleep(Duration::from_millis(200)).await;
        store.create_migration_lease().await?;
    }
    let started = std::time::Instant::now();
    while !store
        .take_migration_lease(holder, Utc::now(), lease_end())
        .await?
    {
        if started.elapsed() > MIGRATION_WAIT {
            return Err(ServiceError::StoreUnavailable(
                "another process holds the migration lease".to_owned(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}
