//! `/messages`: the organization's inbox (notifications and announcements), and
//! `/compliance/notifications`: the notification log.

use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::http::error::ApiError;
use crate::http::extract::{PageParams, Query};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Deleted, Paged};
use crate::http::state::{AppState, Caller};
use crate::notify::Channel;
use crate::services::notifications::{self, LogEntry, MessageRecord};

/// A message of the organization's inbox.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: String,
    pub org_id: String,
    /// `notification`, `digest` or `announcement`.
    pub kind: String,
    pub title: String,
    pub body: String,
    /// The notification it delivers, if any.
    pub notification_id: Option<String>,
    /// Who posted it (`system` for notifications).
    pub created_by: String,
    pub read_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

impl From<MessageRecord> for Message {
    fn from(m: MessageRecord) -> Self {
        Message {
            id: m.id,
            org_id: m.org_id,
            kind: m.kind,
            title: m.title,
            body: m.body,
            notification_id: m.notification_id,
            created_by: m.created_by,
            read_at: m.read_at,
            created_at: m.created_at,
        }
    }
}

/// What became of one delivery attempt.
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DeliveryStatus {
    Sent,
    Failed,
    Retrying,
    Skipped,
    Disabled,
    Held,
    Digested,
}

impl DeliveryStatus {
    fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Sent => "sent",
            DeliveryStatus::Failed => "failed",
            DeliveryStatus::Retrying => "retrying",
            DeliveryStatus::Skipped => "skipped",
            DeliveryStatus::Disabled => "disabled",
            DeliveryStatus::Held => "held",
            DeliveryStatus::Digested => "digested",
        }
    }
}

/// One notification delivery attempt.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotificationAttempt {
    pub id: String,
    pub notification_id: String,
    #[schema(value_type = Channel)]
    pub channel: String,
    #[schema(value_type = DeliveryStatus)]
    pub status: String,
    /// The attempt's number (0 for held and digested).
    pub attempt: u32,
    /// The receiver's HTTP status.
    pub response_status: Option<u16>,
    /// What went wrong, or why it was skipped.
    pub error: Option<String>,
    pub at: DateTime<Utc>,
}

impl From<LogEntry> for NotificationAttempt {
    fn from(e: LogEntry) -> Self {
        NotificationAttempt {
            id: e.id,
            notification_id: e.notification_id,
            channel: e.channel,
            status: e.status,
            attempt: e.attempt,
            response_status: e.response_status,
            error: e.error,
            at: e.at,
        }
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct InboxQuery {
    #[param(value_type = Option<bool>)]
    unread: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// `GET /messages`: newest first; `unread=true` (or `false`) narrows it.
pub(crate) async fn inbox(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<InboxQuery>,
) -> Result<Paged<Message>, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let unread = match q.unread.as_deref() {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(_) => return Err(ApiError::invalid_field("unread", "must be true or false")),
    };
    let (items, total) = notifications::inbox(
        &state.infra.store,
        &granted.org,
        unread,
        page.limit,
        page.offset,
    )
    .await?;
    let items = items.into_iter().map(Message::from).collect();
    Ok(Paged::new("messages", items, total, page))
}

/// `PATCH /messages/:id/read`.
pub(crate) async fn mark_read(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Message>, ApiError> {
    let message = notifications::mark_read(&state.infra.store, &granted.org, &id).await?;
    Ok(Answer::ok(message.into()))
}

/// `DELETE /messages/:id`.
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    notifications::delete(&state.infra.store, &caller, &granted.org, &id).await?;
    Ok(Answer::ok(Deleted::new(id)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct LogQuery {
    #[param(inline)]
    channel: Option<Channel>,
    #[param(inline)]
    status: Option<DeliveryStatus>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// `GET /compliance/notifications`: every delivery attempt, newest first.
pub(crate) async fn log(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<LogQuery>,
) -> Result<Paged<NotificationAttempt>, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = notifications::log(
        &state.infra.store,
        &granted.org,
        (
            q.channel.map(Channel::as_str),
            q.status.map(DeliveryStatus::as_str),
        ),
        page.limit,
        page.offset,
    )
    .await?;
    let items = items.into_iter().map(NotificationAttempt::from).collect();
    Ok(Paged::new("attempts", items, total, page))
}
