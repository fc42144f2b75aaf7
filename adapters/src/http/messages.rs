//! `/messages`: the organization's inbox (notifications and announcements), and
//! `/compliance/notifications`: the notification log.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::gate::Granted;
use crate::http::response::{ok, paginated};
use crate::http::state::{AppState, Caller};
use crate::services::notifications;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InboxQuery {
    unread: Option<String>,
    #[serde(flatten)]
    page: PageParams,
}

/// `GET /messages`: newest first; `unread=true` (or `false`) narrows it.
pub(crate) async fn inbox(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<InboxQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let unread = match q.unread.as_deref() {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(_) => return Err(ApiError::invalid_field("unread", "must be true or false")),
    };
    let (items, total) =
        notifications::inbox(&state, &granted.org, unread, page.limit, page.offset).await?;
    Ok(paginated("messages", items, total, &page))
}

/// `PATCH /messages/:id/read`.
pub(crate) async fn mark_read(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let message = notifications::mark_read(&state, &granted.org, &id).await?;
    Ok(ok(StatusCode::OK, message))
}

/// `DELETE /messages/:id`.
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    notifications::delete(&state, &caller, &granted.org, &id).await?;
    Ok(ok(StatusCode::OK, json!({"id": id, "deleted": true})))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AnnouncementBody {
    title: String,
    body: String,
}

/// `POST /messages/announcements`.
pub(crate) async fn announce(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<AnnouncementBody>,
) -> Result<Response, ApiError> {
    let message =
        notifications::announce(&state, &caller, &granted.org, (&body.title, &body.body)).await?;
    Ok(ok(StatusCode::CREATED, message))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LogQuery {
    channel: Option<String>,
    status: Option<String>,
    #[serde(flatten)]
    page: PageParams,
}

/// `GET /compliance/notifications`: every delivery attempt, newest first.
pub(crate) async fn log(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<LogQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = notifications::log(
        &state,
        &granted.org,
        (q.channel.as_deref(), q.status.as_deref()),
        page.limit,
        page.offset,
    )
    .await?;
    Ok(paginated("attempts", items, total, &page))
}
