//! The notifications inbox and announcements: what reaches the visitor, and, for
//! those the API lets manage messages, the organization's own announcements posted,
//! edited and removed.

use std::collections::HashMap;

use askama::Template;
use axum::http::Method;
use axum::response::Response;
use serde::de::IgnoredAny;
use serde_json::{json, Value};

use super::api::{self, act, segment, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::Visitor;
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

/// An announcement the organization's admins posted, as its edit form shows it.
pub struct Managed {
    id: String,
    title: String,
    body: String,
    severity: String,
    starts_at: String,
    ends_at: String,
    phase: String,
    dismissible: bool,
}

/// The severities of an announcement.
const SEVERITIES: [&str; 3] = ["info", "warning", "critical"];

#[derive(Template)]
#[template(path = "console/inbox.html")]
struct InboxPage {
    frame: Frame,
    messages: Vec<Item>,
    announcements: Vec<Item>,
    managed: Vec<Managed>,
    severities: [&'static str; 3],
}

/// An instant as a `datetime-local` field holds it (UTC, to the minute).
fn local_field(at: &chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M").to_string()
}

/// A `datetime-local` field's value (read as UTC) as the API takes it: `None` when
/// empty, refused when it is not a date and time.
fn instant_of(form: &HashMap<String, String>, name: &str) -> Result<Option<String>, Refusal> {
    let text = field(form, name);
    if text.is_empty() {
        return Ok(None);
    }
    ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|f| chrono::NaiveDateTime::parse_from_str(text, f).ok())
        .map(|at| Some(api::instant(&at.and_utc())))
        .ok_or_else(|| {
            Refusal::invalid(format!(
                "{name}: a date and time (UTC), such as 2026-12-01T09:00"
            ))
        })
}

/// An announcement's fields as the API's post and edit take them.
fn announcement_of(form: &HashMap<String, String>, new: bool) -> Result<Value, Refusal> {
    let mut body = serde_json::Map::new();
    for name in ["title", "body", "severity"] {
        body.insert(name.to_owned(), json!(field(form, name)));
    }
    body.insert(
        "dismissible".to_owned(),
        json!(field(form, "dismissible") == "on"),
    );
    body.insert("endsAt".to_owned(), json!(instant_of(form, "endsAt")?));
    if let Some(starts) = instant_of(form, "startsAt")? {
        body.insert("startsAt".to_owned(), json!(starts));
    }
    if new {
        body.insert(
            "includeTeams".to_owned(),
            json!(field(form, "includeTeams") == "on"),
        );
    }
    Ok(Value::Object(body))
}

/// The page: [`page::get`] and [`page::post`] are its handlers.
pub struct Page;

impl page::Acting for Page {
    const PLACE: (&'static str, &'static str) = ("Inbox", "/console/inbox");

    async fn show(
        _console: &Console,
        visitor: &Visitor,
        mut frame: Frame,
        _q: &HashMap<String, String>,
        outcome: Option<Result<String, Refusal>>,
    ) -> Result<Response, Refusal> {
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
        let managed = if frame.may("postAnnouncement") {
            frame
                .list::<Announcement>(
                    visitor,
                    ("listAnnouncements", "announcements"),
                    "/api/messages/announcements?view=managed&limit=50",
                    "announcements",
                )
                .await?
                .items
                .into_iter()
                .map(|a| Managed {
                    starts_at: local_field(&a.starts_at),
                    ends_at: a.ends_at.as_ref().map(local_field).unwrap_or_default(),
                    phase: api::wire(&a.phase),
                    severity: api::wire(&a.severity),
                    dismissible: a.dismissible,
                    id: a.id,
                    title: a.title,
                    body: a.body,
                })
                .collect()
        } else {
            Vec::new()
        };
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
                managed,
                severities: SEVERITIES,
            },
            code,
        ))
    }

    /// `POST /console/inbox`: `read` a message, `dismiss` an announcement; `post`,
    /// `edit` and `remove` the organization's announcements.
    async fn act(
        visitor: &Visitor,
        form: &HashMap<String, String>,
        org: &str,
    ) -> Result<String, Refusal> {
        if field(form, "action") == "post" {
            let posted: Announcement = act(
                &visitor.api,
                (Method::POST, "/api/messages/announcements"),
                org,
                Some(announcement_of(form, true)?),
            )
            .await?;
            return Ok(format!("announcement {} posted", posted.title));
        }
        let id = segment(field(form, "id"))?;
        let uri = format!("/api/messages/announcements/{id}");
        match field(form, "action") {
            "edit" => {
                let edited: Announcement = act(
                    &visitor.api,
                    (Method::PUT, &uri),
                    org,
                    Some(announcement_of(form, false)?),
                )
                .await?;
                Ok(format!("announcement {} changed", edited.title))
            }
            "remove" => {
                act::<IgnoredAny>(&visitor.api, (Method::DELETE, &uri), org, None).await?;
                Ok(format!("announcement {id} removed"))
            }
            "read" => {
                act::<IgnoredAny>(
                    &visitor.api,
                    (Method::PATCH, &format!("/api/messages/{id}/read")),
                    org,
                    None,
                )
                .await?;
                Ok(format!("message {id} read"))
            }
            "dismiss" => {
                let uri = format!("/api/messages/announcements/{id}/dismiss");
                act::<IgnoredAny>(&visitor.api, (Method::POST, &uri), org, None).await?;
                Ok(format!("announcement {id} dismissed"))
            }
            _ => Err(unknown_action()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_field_reads_as_utc_and_anything_else_is_refused() {
        let form: HashMap<String, String> = [
            ("startsAt", "2026-12-01T09:30"),
            ("endsAt", ""),
            ("title", " T "),
            ("severity", "warning"),
            ("dismissible", "on"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let body = announcement_of(&form, true).unwrap();
        assert_eq!(body["startsAt"], "2026-12-01T09:30:00Z");
        assert_eq!(body["endsAt"], Value::Null);
        assert_eq!(body["title"], "T");
        assert_eq!(body["dismissible"], true);
        assert_eq!(body["includeTeams"], false);
        assert!(announcement_of(&form, false)
            .unwrap()
            .get("includeTeams")
            .is_none());
        let mut wrong = form.clone();
        wrong.insert("endsAt".to_owned(), "tomorrow".to_owned());
        let refusal = announcement_of(&wrong, true).unwrap_err();
        assert!(
            refusal.message.starts_with("endsAt:"),
            "{}",
            refusal.message
        );
        let at = chrono::DateTime::parse_from_rfc3339("2026-12-01T09:30:59Z").unwrap();
        assert_eq!(local_field(&at.to_utc()), "2026-12-01T09:30");
    }
}
