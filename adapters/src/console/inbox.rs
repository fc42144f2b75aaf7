//! The notifications inbox and announcements.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use serde_json::Value;

use super::api::{self, act, segment, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};

/// A message or an announcement.
pub struct Item {
    id: String,
    title: String,
    body: String,
    when: String,
    state: String,
    can_act: bool,
}

#[derive(Template)]
#[template(path = "console/inbox.html")]
struct InboxPage {
    frame: Frame,
    messages: Vec<Item>,
    announcements: Vec<Item>,
}

async fn show(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    outcome: Option<Result<String, Refusal>>,
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(console, visitor, q, ("Inbox", "/console/inbox")).await?;
    if frame.org.is_empty() {
        return Ok(page::empty(frame));
    }
    let messages = frame
        .read(visitor, ("inbox", "messages"), "/api/messages?limit=50")
        .await?;
    let announcements = frame
        .read(
            visitor,
            ("listAnnouncements", "announcements"),
            "/api/messages/announcements?limit=50",
        )
        .await?;
    let messages = api::items(&messages)
        .iter()
        .map(|m| {
            let unread = m.get("readAt").is_none_or(Value::is_null);
            Item {
                id: api::text(m, "id"),
                title: api::text(m, "title"),
                body: api::text(m, "body"),
                when: api::text(m, "createdAt"),
                state: if unread { "unread" } else { "read" }.to_owned(),
                can_act: unread,
            }
        })
        .collect();
    let announcements = api::items(&announcements)
        .iter()
        .map(|a| Item {
            id: api::text(a, "id"),
            title: api::text(a, "title"),
            body: api::text(a, "body"),
            when: api::text(a, "startsAt"),
            state: api::text(a, "severity"),
            can_act: a
                .get("dismissible")
                .and_then(Value::as_bool)
                .unwrap_or(false)
                && a.get("dismissedAt").is_none_or(Value::is_null),
        })
        .collect();
    let code = frame.settle(outcome);
    Ok(page::render(
        &InboxPage {
            frame,
            messages,
            announcements,
        },
        code,
    ))
}

/// `GET /console/inbox`.
pub async fn page(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show(&console, &visitor, &q, None)
        .await
        .unwrap_or_else(page::refused)
}

/// `POST /console/inbox`: `read` a message, `dismiss` an announcement.
pub async fn action(State(console): State<Console>, posted: Posted) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let outcome = async {
        let id = segment(field(&form, "id"))?;
        match field(&form, "action") {
            "read" => {
                act(
                    &visitor.api,
                    (Method::PATCH, &format!("/api/messages/{id}/read")),
                    &org,
                    None,
                )
                .await?;
                Ok(format!("message {id} read"))
            }
            "dismiss" => {
                let uri = format!("/api/messages/announcements/{id}/dismiss");
                act(&visitor.api, (Method::POST, &uri), &org, None).await?;
                Ok(format!("announcement {id} dismissed"))
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    show(&console, &visitor, &page::again(org), Some(outcome))
        .await
        .unwrap_or_else(page::refused)
}
