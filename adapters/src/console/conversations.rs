//! Conversations: the visitor's conversations in the organization, one of them with
//! its messages (new ones appear without a reload: the page's script listens to the
//! API's message stream through [`stream`], on the console's session), writing to
//! it, starting one with other members, marking read, leaving.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use serde::de::IgnoredAny;
use serde_json::json;

use super::api::{self, act, segment, Call, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};
use crate::http::conversations::{Conversation, ConversationMessage, MessagePage};
use crate::http::members::Member;

/// Where the page lives.
pub const PATH: &str = "/console/conversations";

/// Where its script listens for new messages.
pub const STREAM: &str = "/console/conversations/stream";

/// A conversation in the list.
pub struct Listed {
    id: String,
    subject: String,
    with: String,
    last: String,
    unread: u64,
    open: bool,
}

/// A message as the page shows it.
pub struct Said {
    id: String,
    author: String,
    body: String,
    when: String,
}

/// A member the visitor may write to.
#[derive(Clone)]
pub struct Person {
    id: String,
    label: String,
}

#[derive(Template)]
#[template(path = "console/conversations.html")]
struct ConversationsPage {
    frame: Frame,
    conversations: Vec<Listed>,
    /// The conversation shown (its id), with its messages oldest first.
    open: Option<(String, String)>,
    messages: Vec<Said>,
    /// The other members (to start a conversation with), and everyone's names for
    /// the script's new messages.
    others: Vec<Person>,
    people: Vec<Person>,
    stream: String,
}

/// A person by e-mail when the organization's members name one, else by id.
fn named(people: &HashMap<String, String>, id: &str) -> String {
    people.get(id).cloned().unwrap_or_else(|| id.to_owned())
}

async fn show(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    outcome: Option<Result<String, Refusal>>,
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(console, visitor, q, ("Conversations", PATH)).await?;
    if frame.org.is_empty() {
        return Ok(page::empty(frame));
    }
    let members_uri = format!(
        "/api/organization/{}/members?limit=100",
        segment(&frame.org)?
    );
    let members = frame
        .list::<Member>(visitor, ("listMembers", "members"), &members_uri, "members")
        .await?;
    let people: HashMap<String, String> = members
        .items
        .iter()
        .map(|m| {
            let label = m.email.clone().unwrap_or_else(|| m.user_id.clone());
            (m.user_id.clone(), label)
        })
        .collect();
    let me = &visitor.session.user_id;
    let listed = frame
        .list::<Conversation>(
            visitor,
            ("listConversations", "conversations"),
            "/api/messages/conversations?limit=50",
            "conversations",
        )
        .await?;
    let chosen = q.get("id").map(String::as_str).unwrap_or_default();
    let mut open = None;
    let conversations = listed
        .items
        .into_iter()
        .map(|c| {
            let with: Vec<String> = c
                .participants
                .iter()
                .filter(|p| &p.user_id != me && p.left_at.is_none())
                .map(|p| named(&people, &p.user_id))
                .collect();
            let subject = c
                .subject
                .clone()
                .unwrap_or_else(|| "(no subject)".to_owned());
            let is_open = c.id == chosen;
            if is_open {
                open = Some((c.id.clone(), subject.clone()));
            }
            Listed {
                with: with.join(", "),
                last: api::instant(&c.last_message_at),
                unread: c.unread,
                open: is_open,
                id: c.id,
                subject,
            }
        })
        .collect();
    let mut messages = Vec::new();
    if let Some((id, _)) = &open {
        let uri = format!(
            "/api/messages/conversations/{}/messages?limit=100",
            segment(id)?
        );
        let page: Option<MessagePage> = frame
            .read(visitor, ("conversationMessages", "the messages"), &uri)
            .await?;
        let mut said: Vec<ConversationMessage> = page.map(|p| p.messages).unwrap_or_default();
        said.reverse();
        messages = said
            .into_iter()
            .map(|m| Said {
                id: m.id,
                author: named(&people, &m.author_id),
                body: m.body,
                when: api::instant(&m.created_at),
            })
            .collect();
    }
    // Everyone active, by name (for the script's new messages), and the others (to
    // start a conversation with).
    let people: Vec<Person> = members
        .items
        .iter()
        .filter(|m| m.active)
        .map(|m| Person {
            id: m.user_id.clone(),
            label: named(&people, &m.user_id),
        })
        .collect();
    let others = people.iter().filter(|p| &p.id != me).cloned().collect();
    let stream = format!("{STREAM}?{}", frame.org_query());
    let code = frame.settle(outcome);
    Ok(page::render(
        &ConversationsPage {
            frame,
            conversations,
            open,
            messages,
            others,
            people,
            stream,
        },
        code,
    ))
}

/// `GET /console/conversations` (`id`: the one to show).
pub async fn page(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show(&console, &visitor, &q, None)
        .await
        .unwrap_or_else(page::refused)
}

/// `GET /console/conversations/stream?org=`: the API's message stream for the
/// visitor in the organization (`text/event-stream`), on the console's session; the
/// API judges it (membership, the per-user limit) and ends it with the session's
/// token, after which the browser reconnects.
pub async fn stream(
    State(_console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let org = q.get("org").map(String::as_str).unwrap_or_default();
    visitor
        .api
        .stream(Call {
            uri: "/api/messages/stream",
            org: Some(org),
            ..Call::default()
        })
        .await
        .unwrap_or_else(|refusal| page::failure(&refusal))
}

/// `POST /console/conversations`: `start` one, `write` to one, `read` one, `leave`
/// one.
pub async fn action(State(console): State<Console>, posted: Posted) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let mut shown = field(&form, "id").to_owned();
    let outcome = async {
        if field(&form, "action") == "start" {
            let participants: Vec<&str> = form
                .iter()
                .filter(|(k, v)| k.starts_with("with.") && v.as_str() == "on")
                .map(|(k, _)| k.trim_start_matches("with."))
                .collect();
            let subject = Some(field(&form, "subject")).filter(|s| !s.is_empty());
            let body = json!({"participants": participants, "body": field(&form, "body"), "subject": subject});
            let started: Conversation = act(
                &visitor.api,
                (Method::POST, "/api/messages/conversations"),
                &org,
                Some(body),
            )
            .await?;
            shown.clone_from(&started.id);
            return Ok("the conversation was started".to_owned());
        }
        let id = segment(field(&form, "id"))?;
        let uri = format!("/api/messages/conversations/{id}");
        match field(&form, "action") {
            "write" => {
                act::<IgnoredAny>(
                    &visitor.api,
                    (Method::POST, &format!("{uri}/messages")),
                    &org,
                    Some(json!({"body": field(&form, "body")})),
                )
                .await?;
                Ok("the message was sent".to_owned())
            }
            "read" => {
                act::<IgnoredAny>(
                    &visitor.api,
                    (Method::POST, &format!("{uri}/read")),
                    &org,
                    None,
                )
                .await?;
                Ok("the conversation is read".to_owned())
            }
            "leave" => {
                act::<IgnoredAny>(
                    &visitor.api,
                    (Method::DELETE, &format!("{uri}/participants/me")),
                    &org,
                    None,
                )
                .await?;
                shown.clear();
                Ok("you left the conversation".to_owned())
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    let mut q = page::again(org);
    if !shown.is_empty() {
        q.insert("id".to_owned(), shown);
    }
    show(&console, &visitor, &q, Some(outcome))
        .await
        .unwrap_or_else(page::refused)
}
