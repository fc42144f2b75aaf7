//! The notifications inbox and announcements.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use serde::de::IgnoredAny;

use super::api::{self, act, segment, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};
use crate::http::announcements::Announcement;
use crate::http::messages::Message;

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
        .list::<Message>(
            visitor,
            ("inbox", "messages"),
            "/api/messages?limit=50",
            "messages",
        )
        .await?;
    let announcements = frame
        .list::<Announcement>(
            visitor,
            ("listAnnouncements", "announcements"),
            "/api/messages/announcements?limit=50",
            "announcements",
        )
        .await?;
    let messages = messages
        .items
        .into_iter()
        .map(|m| {
            let unread = m.read_at.is_none();
            Item {
                id: m.id,
                title: m.title,
                body: m.body,
                when: api::instant(&m.created_at),
                state: if unread { "unread" } else { "read" }.to_owned(),
                can_act: unread,
            }
        })
        .collect();
    let announcements = announcements
        .items
        .into_iter()
        .map(|a| Item {
            can_act: a.dismissible && a.dismissed_at.is_none(),
            state: api::wire(&a.severity),
            when: api::instant(&a.starts_at),
            id: a.id,
            title: a.title,
            body: a.body,
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
                act::<IgnoredAny>(
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
                act::<IgnoredAny>(&visitor.api, (Method::POST, &uri), &org, None).await?;
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
