//! Conversations between members of one organization (never across): participants,
//! messages in order, read markers, leaving, and deletes. One-to-one messages are not
//! audited; an admin's delete of someone's message is, without its body.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::services::context::{event, Caller};
use crate::storage::{unit_of_work, NewMessage, OrgRecord, Rate, Store, StoreError};
/// Conversations and their messages, as the workflows answer them.
pub use crate::storage::{ConversationMessageRecord, ConversationRecord};

/// The most messages one page holds.
pub const MAX_PAGE: u32 = 100;

fn not_found() -> ServiceError {
    ServiceError::NotFound("conversation".into())
}

/// The author's per-minute bound, decided by storage in the message's own
/// transaction (no check-then-write: concurrent posts each count the others).
fn rate(config: &Config, now: DateTime<Utc>) -> Rate {
    Rate {
        since: now - Duration::minutes(1),
        limit: config.messages.per_minute,
    }
}

/// The refusal of a message past the author's per-minute limit (429).
fn rate_limited(config: &Config) -> ServiceError {
    ServiceError::RateLimited {
        what: "messages",
        limit: config.messages.per_minute,
        retry_after_seconds: 60,
    }
}

fn body(config: &Config, text: &str) -> ServiceResult<String> {
    messaging::check_text("body", text, config.messages.body_max, false)
        .map_err(|e| ServiceError::invalid(e.field, e.message))
}

/// Starts a conversation with other members of the organization.
pub async fn start(
    store: &Store,
    config: &Config,
    caller: &Caller,
    org: &OrgRecord,
    (named, subject, text): (&[String], Option<&str>, &str),
    now: DateTime<Utc>,
) -> ServiceResult<ConversationRecord> {
    let participants =
        messaging::participants(&caller.user_id, named, config.messages.participants_max)
            .map_err(|e| ServiceError::invalid(e.field, e.message))?;
    let subject = subject
        .map(|s| messaging::check_text("subject", s, messaging::TITLE_MAX, true))
        .transpose()
        .map_err(|e| ServiceError::invalid(e.field, e.message))?;
    let text = body(config, text)?;
    // Only members of this organization, active; no other organization is asked.
    for user in participants.iter().skip(1) {
        let member = store.membership(&org.id, user).await?;
        if !member.is_some_and(|m| m.active) {
            return Err(ServiceError::invalid(
                "participants",
                format!("`{user}` is not an active member of this organization"),
            ));
        }
    }
    let id = crate::new_id();
    let message_id = crate::new_id();
    let written = unit_of_work!(store, |tx| {
        Ok(tx
            .create_conversation(
                (&id, &org.id, subject.as_deref()),
                &participants,
                NewMessage {
                    id: &message_id,
                    author_id: &caller.user_id,
                    body: &text,
                },
                (now, rate(config, now)),
            )
            .await?)
    })?;
    if !written {
        return Err(rate_limited(config));
    }
    store
        .conversation_for(&id, &org.id, &caller.user_id)
        .await?
        .ok_or_else(|| ServiceError::Broken("the new conversation vanished".to_owned()))
}

/// The caller's conversations in the organization, latest activity first.
pub async fn list(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    (limit, offset, ascending): (u32, u64, bool),
) -> ServiceResult<(Vec<ConversationRecord>, u64)> {
    Ok(store
        .conversations_of(&org.id, &caller.user_id, (limit, offset), ascending)
        .await?)
}

/// A conversation the caller takes part in (not found otherwise, whoever else's).
pub async fn conversation(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<ConversationRecord> {
    store
        .conversation_for(id, &org.id, &caller.user_id)
        .await?
        .ok_or_else(not_found)
}

/// A page of messages, newest first, before the message `before` when given;
/// answers the page and whether older ones remain.
pub async fn messages(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
    (before, limit): (Option<&str>, u32),
) -> ServiceResult<(Vec<ConversationMessageRecord>, bool)> {
    let found = conversation(store, caller, org, id).await?;
    let cursor = match before {
        Some(message) => Some(
            store
                .conversation_message(&found.id, message)
                .await?
                .ok_or_else(|| {
                    ServiceError::invalid("before", "is not a message of this conversation")
                })?,
        ),
        None => None,
    };
    let limit = limit.clamp(1, MAX_PAGE);
    let mut page = store
        .conversation_messages(&found.id, cursor.as_ref(), limit + 1)
        .await?;
    let more = page.len() > limit as usize;
    page.truncate(limit as usize);
    Ok((page, more))
}

/// Posts a message to a conversation the caller takes part in.
pub async fn post(
    store: &Store,
    config: &Config,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
    text: &str,
    now: DateTime<Utc>,
) -> ServiceResult<ConversationMessageRecord> {
    let text = body(config, text)?;
    let message_id = crate::new_id();
    let written = unit_of_work!(store, |tx| {
        tx.post_conversation_message(
            (id, &org.id),
            NewMessage {
                id: &message_id,
                author_id: &caller.user_id,
                body: &text,
            },
            (now, rate(config, now)),
        )
        .await
        .map_err(|e| match e {
            StoreError::NotFound(_) => not_found(),
            other => other.into(),
        })
    })?;
    if !written {
        return Err(rate_limited(config));
    }
    store
        .conversation_message(id, &message_id)
        .await?
        .ok_or_else(|| ServiceError::Broken("the new message vanished".to_owned()))
}

/// Moves the caller's read marker to the latest message (or now, if later).
pub async fn read(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<ConversationRecord> {
    let found = conversation(store, caller, org, id).await?;
    // The latest message may carry another replica's clock, a little ahead.
    let at = found.last_message_at.max(now);
    store
        .mark_conversation_read(&found.id, &caller.user_id, at)
        .await?;
    conversation(store, caller, org, id).await
}

/// The caller leaves the conversation.
pub async fn leave(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let found = conversation(store, caller, org, id).await?;
    Ok(store
        .leave_conversation(&found.id, &caller.user_id, now)
        .await?)
}

/// Deletes a message: its author (a participant), unaudited, or an admin of the
/// organization (`messages:manage`), audited as `message.delete` without its body.
pub async fn delete_message(
    store: &Store,
    caller: &Caller,
    (org, manages): (&OrgRecord, bool),
    (id, message_id): (&str, &str),
) -> ServiceResult<()> {
    let found = store
        .conversation_message(id, message_id)
        .await?
        .filter(|m| m.org_id == org.id)
        .ok_or(ServiceError::NotFound("message".into()))?;
    let own = found.author_id == caller.user_id
        && store
            .conversation_for(id, &org.id, &caller.user_id)
            .await?
            .is_some();
    let audit = if own {
        Vec::new()
    } else if manages {
        vec![event(
            caller,
            "message.delete",
            &org.id,
            "message",
            &found.id,
            json!({"kind": "conversation", "conversationId": found.conversation_id, "authorId": found.author_id}),
        )]
    } else {
        return Err(ServiceError::Forbidden(
            "only its author or an admin of the organization (`messages:manage`) deletes a message",
        ));
    };
    unit_of_work!(store, |tx| {
        tx.delete_conversation_message(id, message_id).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })
}
