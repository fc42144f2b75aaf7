//! What the operational endpoints report: whether the database answers, and how
//! far the audit outbox is behind.

use super::{ServiceError, ServiceResult};
use crate::services::context::AppState;
use crate::storage::{OutboxDepth, QueueDepth, Store};

/// The database answers and the process is not stopping.
pub async fn ready(state: &AppState) -> ServiceResult<()> {
    if state.is_draining() {
        return Err(ServiceError::Stopping);
    }
    Ok(state.infra.store.ping().await?)
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
