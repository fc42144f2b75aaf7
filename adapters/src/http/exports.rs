//! Organization exports: `POST /admin/organizations/{id}/exports` (super-admins)
//! and `POST /organization/{id}/exports` (its admins, `org:settings`) ask for one
//! (202); `GET .../exports/{jobId}` follows it; `GET .../exports/{jobId}/download`
//! answers the archive while its 24 hours last.

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use serde::Serialize;

use crate::http::error::ApiError;
use crate::http::gate::Granted;
use crate::http::response::Answer;
use crate::http::state::{AppState, Caller};
use crate::services::exports::{self, ExportRecord};

/// An export job as answered.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportJob {
    pub id: String,
    pub org_id: String,
    /// `queued`, `running`, `done`, `failed` or `expired`.
    #[schema(example = "queued")]
    pub status: String,
    /// Why it failed.
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Until when the archive can be downloaded (24 hours after it is done).
    pub expires_at: Option<DateTime<Utc>>,
    /// The archive's size in bytes.
    pub size_bytes: Option<u64>,
    /// The archive's SHA-256, hex.
    pub sha256: Option<String>,
    /// Where the archive is downloaded, once done and until it expires.
    pub download_url: Option<String>,
}

/// Where the admins' (`admin`) or the organization's own routes are.
fn base(admin: bool, org_id: &str) -> String {
    if admin {
        format!("/api/admin/organizations/{org_id}/exports")
    } else {
        format!("/api/organization/{org_id}/exports")
    }
}

fn job(record: ExportRecord, admin: bool) -> ExportJob {
    let download_url = (record.status == "done"
        && record.expires_at.is_some_and(|at| at > Utc::now()))
    .then(|| format!("{}/{}/download", base(admin, &record.org_id), record.id));
    ExportJob {
        id: record.id,
        org_id: record.org_id,
        status: record.status,
        error: record.error,
        created_at: record.created_at,
        started_at: record.started_at,
        finished_at: record.finished_at,
        expires_at: record.expires_at,
        size_bytes: record.size_bytes,
        sha256: record.sha256,
        download_url,
    }
}

async fn request(
    state: &AppState,
    caller: &Caller,
    granted: &Granted,
    admin: bool,
) -> Result<Answer<ExportJob>, ApiError> {
    let record = exports::request(&state.infra.store, caller, &granted.org, Utc::now()).await?;
    Ok(Answer::accepted(job(record, admin)))
}

async fn status(
    state: &AppState,
    granted: &Granted,
    id: &str,
    admin: bool,
) -> Result<Answer<ExportJob>, ApiError> {
    let record = exports::status(&state.infra.store, &granted.org, id).await?;
    Ok(Answer::ok(job(record, admin)))
}

async fn download(state: &AppState, granted: &Granted, id: &str) -> Result<Response, ApiError> {
    let (record, chunks) =
        exports::download(&state.infra.store, &granted.org, id, Utc::now()).await?;
    let body = Body::from_stream(chunks.map(|chunk| chunk.map(Bytes::from)));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/zip"),
    );
    let disposition = format!(
        "attachment; filename=\"export-{}-{}.zip\"",
        record.org_id, record.id
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    if let Some(size) = record.size_bytes {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    }
    if let Some(value) = record
        .sha256
        .as_deref()
        .and_then(|s| HeaderValue::from_str(s).ok())
    {
        headers.insert("x-content-sha256", value);
    }
    Ok(response)
}

/// `POST /admin/organizations/{id}/exports`.
pub(crate) async fn admin_request(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
) -> Result<Answer<ExportJob>, ApiError> {
    request(&state, &caller, &granted, true).await
}

/// `GET /admin/organizations/{id}/exports/{jobId}`.
pub(crate) async fn admin_status(
    State(state): State<AppState>,
    granted: Granted,
    Path((_, id)): Path<(String, String)>,
) -> Result<Answer<ExportJob>, ApiError> {
    status(&state, &granted, &id, true).await
}

/// `GET /admin/organizations/{id}/exports/{jobId}/download`.
pub(crate) async fn admin_download(
    State(state): State<AppState>,
    granted: Granted,
    Path((_, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    download(&state, &granted, &id).await
}

/// `POST /organization/{id}/exports`.
pub(crate) async fn org_request(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
) -> Result<Answer<ExportJob>, ApiError> {
    request(&state, &caller, &granted, false).await
}

/// `GET /organization/{id}/exports/{jobId}`.
pub(crate) async fn org_status(
    State(state): State<AppState>,
    granted: Granted,
    Path((_, id)): Path<(String, String)>,
) -> Result<Answer<ExportJob>, ApiError> {
    status(&state, &granted, &id, false).await
}

/// `GET /organization/{id}/exports/{jobId}/download`.
pub(crate) async fn org_download(
    State(state): State<AppState>,
    granted: Granted,
    Path((_, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    download(&state, &granted, &id).await
}
