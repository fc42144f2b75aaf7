//! `/plugins/queue`: the build queue of plugin images, its failures and dead letters.

use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::http::error::ApiError;
use crate::http::extract::{PageParams, Query};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Paged};
use crate::http::state::{AppState, Caller};
use crate::services::builds::{self, BuildJobRecord};

/// A build of a plugin's image.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildJob {
    pub id: String,
    pub org_id: String,
    pub plugin_id: String,
    pub image: String,
    /// `tier` or `dlq`.
    pub queue: String,
    /// `queued`, `running`, `completed`, `failed`, `timed_out`, `replayed` or `purged`.
    pub status: String,
    /// Attempts made in its queue.
    pub attempts: u32,
    /// The last attempt's error (bounded).
    pub last_error: Option<String>,
    /// `succeeded`, `failed` or `timed_out`.
    pub last_outcome: Option<String>,
    /// Not before.
    pub run_after: DateTime<Utc>,
    /// The claim's lease, while running.
    pub lease_until: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<BuildJobRecord> for BuildJob {
    fn from(j: BuildJobRecord) -> Self {
        BuildJob {
            id: j.id,
            org_id: j.org_id,
            plugin_id: j.plugin_id,
            image: j.image,
            queue: j.queue,
            status: j.status,
            attempts: j.attempts,
            last_error: j.last_error,
            last_outcome: j.last_outcome,
            run_after: j.run_after,
            lease_until: j.lease_until,
            created_at: j.created_at,
            updated_at: j.updated_at,
        }
    }
}

/// How many jobs stand in one queue at one status.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct QueueCount {
    /// `tier` or `dlq`.
    pub queue: String,
    pub status: String,
    pub count: u64,
}

/// Job counts by queue and status.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct QueueStatus {
    pub counts: Vec<QueueCount>,
}

/// How many dead letters a purge removed.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Purged {
    pub purged: u64,
}

/// `GET /plugins/queue/status` (admin): job counts by queue and status, of the
/// organization (of all, for a super-admin).
pub(crate) async fn queue_status(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<QueueStatus>, ApiError> {
    let counts = builds::status(&state.infra.store, &granted.org, granted.super_admin).await?;
    let counts = counts
        .into_iter()
        .map(|(queue, status, count)| QueueCount {
            queue,
            status,
            count,
        })
        .collect();
    Ok(Answer::ok(QueueStatus { counts }))
}

async fn jobs(
    state: AppState,
    granted: Granted,
    params: PageParams,
    dead_letters: bool,
) -> Result<Paged<BuildJob>, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = builds::jobs(
        &state.infra.store,
        (&granted.org, granted.super_admin),
        dead_letters,
        page.limit,
        page.offset,
    )
    .await?;
    let items = items.into_iter().map(BuildJob::from).collect();
    Ok(Paged::new("jobs", items, total, page))
}

/// `GET /plugins/queue/failed` (admin): builds that ended failed or timed out.
pub(crate) async fn failed(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<PageParams>,
) -> Result<Paged<BuildJob>, ApiError> {
    jobs(state, granted, params, false).await
}

/// `GET /plugins/queue/dlq` (admin): the dead letter queue.
pub(crate) async fn dead_letters(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<PageParams>,
) -> Result<Paged<BuildJob>, ApiError> {
    jobs(state, granted, params, true).await
}

/// `POST /plugins/queue/dlq/:jobId/replay` (admin, tenant-checked).
pub(crate) async fn replay(
    State(state): State<AppState>,
    granted: Granted,
    Path(job_id): Path<String>,
) -> Result<Answer<BuildJob>, ApiError> {
    let job = builds::replay(
        &state.infra.store,
        (&granted.org, granted.super_admin),
        &job_id,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(job.into()))
}

/// `DELETE /plugins/queue/dlq` (super-admin): purge every dead letter.
pub(crate) async fn purge(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Answer<Purged>, ApiError> {
    let purged = builds::purge(&state.infra.store, &caller, Utc::now()).await?;
    Ok(Answer::ok(Purged { purged }))
}
