//! `/messages/conversations` and the live stream, `/messages/stream`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::http::announcements::Announcement;
use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Deleted, Paged};
use crate::http::state::{AppState, Caller};
use crate::replica::feed::FeedEvent;
use crate::services::conversations::{self, ConversationMessageRecord, ConversationRecord};

/// A new conversation.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ConversationBody {
    /// The other members taking part (user ids of this organization's members).
    #[schema(min_items = 1)]
    participants: Vec<String>,
    #[schema(max_length = 200)]
    subject: Option<String>,
    /// The first message.
    #[schema(min_length = 1)]
    body: String,
}

/// A new message.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct MessageBody {
    #[schema(min_length = 1)]
    body: String,
}

/// A participant.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Participant {
    pub user_id: String,
    pub joined_at: DateTime<Utc>,
    pub last_read_at: Option<DateTime<Utc>>,
    pub left_at: Option<DateTime<Utc>>,
}

/// A conversation, as the reader sees it.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub id: String,
    pub org_id: String,
    pub subject: Option<String>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub last_message_at: DateTime<Utc>,
    /// Where the reader has read up to.
    pub last_read_at: Option<DateTime<Utc>>,
    /// Messages by others after the reader's marker.
    pub unread: u64,
    pub participants: Vec<Participant>,
}

impl From<ConversationRecord> for Conversation {
    fn from(c: ConversationRecord) -> Self {
        Conversation {
            id: c.id,
            org_id: c.org_id,
            subject: c.subject,
            created_by: c.created_by,
            created_at: c.created_at,
            last_message_at: c.last_message_at,
            last_read_at: c.last_read_at,
            unread: c.unread,
            participants: c
                .participants
                .into_iter()
                .map(|p| Participant {
                    user_id: p.user_id,
                    joined_at: p.joined_at,
                    last_read_at: p.last_read_at,
                    left_at: p.left_at,
                })
                .collect(),
        }
    }
}

/// A message of a conversation.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationMessage {
    pub id: String,
    pub conversation_id: String,
    pub author_id: String,
    pub body: String,
    pub created_at: DateTime<Utc>,
}

impl From<ConversationMessageRecord> for ConversationMessage {
    fn from(m: ConversationMessageRecord) -> Self {
        ConversationMessage {
            id: m.id,
            conversation_id: m.conversation_id,
            author_id: m.author_id,
            body: m.body,
            created_at: m.created_at,
        }
    }
}

/// A page of messages, newest first, and where the next (older) one starts.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessagePage {
    pub messages: Vec<ConversationMessage>,
    /// Pass as `before` for the older messages; null at the first message.
    pub next_before: Option<String>,
}

/// `POST /messages/conversations`.
pub(crate) async fn start(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<ConversationBody>,
) -> Result<Answer<Conversation>, ApiError> {
    let started = conversations::start(
        &state.infra.store,
        &state.config,
        &caller,
        &granted.org,
        (&body.participants, body.subject.as_deref(), &body.body),
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(started.into()))
}

/// `GET /messages/conversations`.
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Query(page): Query<PageParams>,
) -> Result<Paged<Conversation>, ApiError> {
    let page = page.check_sorted(
        state.config.http.max_page_limit,
        &["lastMessageAt"],
        "lastMessageAt",
    )?;
    let ascending = page.sort_order == SortOrder::Asc;
    let (items, total) = conversations::list(
        &state.infra.store,
        &caller,
        &granted.org,
        (page.limit, page.offset, ascending),
    )
    .await?;
    let items = items.into_iter().map(Conversation::from).collect();
    Ok(Paged::new("conversations", items, total, page))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct MessagesQuery {
    /// A message id: the page starts just before it (older).
    before: Option<String>,
    /// 1 to 100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u32>,
}

/// `GET /messages/conversations/{id}/messages`.
pub(crate) async fn messages(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Query(q): Query<MessagesQuery>,
) -> Result<Answer<MessagePage>, ApiError> {
    let limit = q.limit.unwrap_or(50);
    if !(1..=conversations::MAX_PAGE).contains(&limit) {
        return Err(ApiError::invalid_field(
            "limit",
            format!("must be an integer from 1 to {}", conversations::MAX_PAGE),
        ));
    }
    let (page, more) = conversations::messages(
        &state.infra.store,
        &caller,
        &granted.org,
        &id,
        (q.before.as_deref(), limit),
    )
    .await?;
    let next_before = if more {
        page.last().map(|m| m.id.clone())
    } else {
        None
    };
    Ok(Answer::ok(MessagePage {
        messages: page.into_iter().map(ConversationMessage::from).collect(),
        next_before,
    }))
}

/// `POST /messages/conversations/{id}/messages`.
pub(crate) async fn post(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<MessageBody>,
) -> Result<Answer<ConversationMessage>, ApiError> {
    let posted = conversations::post(
        &state.infra.store,
        &state.config,
        &caller,
        &granted.org,
        &id,
        &body.body,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(posted.into()))
}

/// `POST /messages/conversations/{id}/read`.
pub(crate) async fn read(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Conversation>, ApiError> {
    let read =
        conversations::read(&state.infra.store, &caller, &granted.org, &id, Utc::now()).await?;
    Ok(Answer::ok(read.into()))
}

/// `DELETE /messages/conversations/{id}/participants/me`.
pub(crate) async fn leave(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    conversations::leave(&state.infra.store, &caller, &granted.org, &id, Utc::now()).await?;
    Ok(Answer::ok(Deleted::new(id)))
}

/// `DELETE /messages/conversations/{id}/messages/{messageId}`.
pub(crate) async fn delete_message(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((id, message_id)): Path<(String, String)>,
) -> Result<Answer<Deleted>, ApiError> {
    let manages = granted.super_admin
        || crate::services::access::holds(
            &state.infra.store,
            &state.config,
            &state.replica.kept,
            &caller,
            &granted.org.id,
            tenancy::Permission::MessagesManage,
        )
        .await?;
    conversations::delete_message(
        &state.infra.store,
        &caller,
        (&granted.org, manages),
        (&id, &message_id),
    )
    .await?;
    Ok(Answer::ok(Deleted::new(message_id)))
}

/// How long one stream lasts: a client reconnects (EventSource does by itself),
/// and its token is checked again.
pub const MAX_STREAM: Duration = Duration::from_secs(900);

/// How often a stream checks again that its token and membership still hold (a
/// revoked session, an expired token, a removed member end it within this).
pub const RECHECK: Duration = Duration::from_secs(1);

/// `GET /messages/stream`: server-sent events, `message` (a conversation's new
/// message, to its participants) and `announcement` (one posted or changed that
/// reaches the organization), with keep-alive comments. Every second the stream
/// checks its token and the reader's membership again, and ends when either fails.
pub(crate) async fn stream(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    headers: axum::http::HeaderMap,
) -> Result<Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let token = crate::auth::bearer(
        headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
    )?
    .to_owned();
    let slot = state
        .replica
        .feed
        .open(&caller.user_id, state.config.messages.streams_per_user)
        .ok_or_else(|| {
            ApiError::new(
                crate::code::ErrorCode::RateLimited,
                format!(
                    "at most {} live streams per user (MESSAGE_STREAMS_PER_USER)",
                    state.config.messages.streams_per_user
                ),
            )
        })?;
    let keep_alive = state.config.messages.keep_alive;
    let deadline = tokio::time::Instant::now() + MAX_STREAM;
    let reader = Reader {
        state,
        caller,
        org: granted.org,
        token,
    };
    let mut recheck = tokio::time::interval(RECHECK);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let events = futures_util::stream::unfold(
        (slot, recheck, reader),
        move |(mut slot, mut recheck, reader)| async move {
            loop {
                let received = tokio::select! {
                    received = slot.events.recv() => received,
                    _ = recheck.tick() => {
                        if reader.still_allowed().await {
                            continue;
                        }
                        return None;
                    }
                    _ = tokio::time::sleep_until(deadline) => return None,
                };
                let event = match received {
                    Ok(event) => event,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                        let note = Event::default()
                            .event("resync")
                            .data(format!("{{\"missed\":{missed}}}"));
                        return Some((Ok(note), (slot, recheck, reader)));
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                };
                if let Some(sent) = for_reader(&event, &reader.caller.user_id, &reader.org) {
                    return Some((Ok(sent), (slot, recheck, reader)));
                }
            }
        },
    );
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(keep_alive)))
}

/// Who holds a stream, to check again.
struct Reader {
    state: AppState,
    caller: Caller,
    org: crate::services::organizations::OrgRecord,
    token: String,
}

impl Reader {
    /// Whether the token is still good and the reader still a member (the same
    /// checks as the request's, from the facts every replica keeps current).
    async fn still_allowed(&self) -> bool {
        let now = Utc::now();
        if crate::http::state::authenticate(&self.state, &self.token, now)
            .await
            .is_err()
        {
            return false;
        }
        let requirement = tenancy::Access::Member.requirement(false, false);
        crate::http::gate::gate(
            &self.state,
            &self.caller,
            &self.org.id,
            crate::http::gate::Named::Header,
            requirement,
            "GET /api/messages/stream",
        )
        .await
        .is_ok()
    }
}

/// The event as this reader gets it, if it is theirs.
fn for_reader(
    event: &Arc<FeedEvent>,
    user: &str,
    org: &crate::services::organizations::OrgRecord,
) -> Option<Event> {
    match event.as_ref() {
        FeedEvent::Message {
            recipients,
            message,
        } => {
            let theirs = message.org_id == org.id && recipients.iter().any(|r| r == user);
            theirs.then(|| {
                let data = serde_json::to_string(&ConversationMessage::from(message.clone()))
                    .unwrap_or_default();
                Event::default()
                    .event("message")
                    .id(message.id.clone())
                    .data(data)
            })
        }
        FeedEvent::Announcement(announcement) => {
            let viewer = messaging::Viewer {
                org_id: &org.id,
                parent_org_id: org.parent_org_id.as_deref(),
                tier: org.tier,
            };
            let now = Utc::now();
            let shown = announcement.audience.reaches(&viewer)
                && announcement.window.phase(now) == messaging::Phase::Active;
            shown.then(|| {
                let data = serde_json::to_string(&Announcement::of(announcement.clone(), now))
                    .unwrap_or_default();
                Event::default()
                    .event("announcement")
                    .id(announcement.id.clone())
                    .data(data)
            })
        }
    }
}
