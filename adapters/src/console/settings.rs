//! The organization's notification settings: e-mail and its recipients, the webhook
//! (its URL and signing secret) with a test that shows what the receiver answered,
//! warnings, and the digest mode.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::api::{act, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};
use crate::http::preferences::Preference;
use crate::services::preferences::WebhookTest;

/// Where the page lives.
pub const PATH: &str = "/console/settings";

#[derive(Template)]
#[template(path = "console/settings.html")]
struct SettingsPage {
    frame: Frame,
    preference: Option<Preference>,
    recipients: String,
    modes: [&'static str; 3],
    tested: Option<WebhookTest>,
}

async fn show(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    (outcome, tested): (Option<Result<String, Refusal>>, Option<WebhookTest>),
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(console, visitor, q, ("Notification settings", PATH)).await?;
    if frame.org.is_empty() {
        return Ok(page::empty(frame));
    }
    let preference: Option<Preference> = frame
        .read(
            visitor,
            ("notificationPreferences", "the notification settings"),
            "/api/compliance/notification-preferences",
        )
        .await?;
    let recipients = preference
        .as_ref()
        .and_then(|p| p.target_users.clone())
        .unwrap_or_default()
        .join("\n");
    let code = frame.settle(outcome);
    Ok(page::render(
        &SettingsPage {
            frame,
            preference,
            recipients,
            modes: ["immediate", "daily", "weekly"],
            tested,
        },
        code,
    ))
}

/// `GET /console/settings`.
pub async fn page(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show(&console, &visitor, &q, (None, None))
        .await
        .unwrap_or_else(page::refused)
}

/// The preference's change as the API reads it: the secret only when one is typed
/// (or cleared on purpose), the recipients one a line or separated by commas.
fn change_of(form: &HashMap<String, String>) -> Value {
    let recipients: Vec<&str> = field(form, "targetUsers")
        .split([',', '\n', '\r'])
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .collect();
    let mut change = Map::new();
    change.insert(
        "emailEnabled".to_owned(),
        json!(field(form, "emailEnabled") == "on"),
    );
    change.insert(
        "notifyWarnings".to_owned(),
        json!(field(form, "notifyWarnings") == "on"),
    );
    change.insert("digestMode".to_owned(), json!(field(form, "digestMode")));
    change.insert("targetUsers".to_owned(), json!(recipients));
    change.insert("webhookUrl".to_owned(), json!(field(form, "webhookUrl")));
    if field(form, "clearSecret") == "on" {
        change.insert("webhookSecret".to_owned(), Value::Null);
    } else if let Some(secret) = form.get("webhookSecret").filter(|s| !s.is_empty()) {
        change.insert("webhookSecret".to_owned(), json!(secret));
    }
    Value::Object(change)
}

/// `POST /console/settings`: `save`, `test` (the saved webhook).
pub async fn action(State(console): State<Console>, posted: Posted) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let mut tested = None;
    let outcome = async {
        match field(&form, "action") {
            "save" => {
                let _: Preference = act(
                    &visitor.api,
                    (Method::PUT, "/api/compliance/notification-preferences"),
                    &org,
                    Some(change_of(&form)),
                )
                .await?;
                Ok("the notification settings were saved".to_owned())
            }
            "test" => {
                let test: WebhookTest = act(
                    &visitor.api,
                    (
                        Method::POST,
                        "/api/compliance/notification-preferences/test",
                    ),
                    &org,
                    None,
                )
                .await?;
                let notice = match test.http_status {
                    Some(status) => format!(
                        "the test was {}: the receiver answered {status}",
                        test.status
                    ),
                    None => format!(
                        "the test was {}: {}",
                        test.status,
                        test.error.clone().unwrap_or_default()
                    ),
                };
                tested = Some(test);
                Ok(notice)
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    show(
        &console,
        &visitor,
        &page::again(org),
        (Some(outcome), tested),
    )
    .await
    .unwrap_or_else(page::refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_blank_secret_keeps_the_saved_one_and_clearing_is_explicit() {
        let kept = change_of(&form(&[("webhookSecret", ""), ("digestMode", "daily")]));
        assert!(kept.get("webhookSecret").is_none());
        assert_eq!(kept["emailEnabled"], false);
        let typed = change_of(&form(&[("webhookSecret", "s3cret")]));
        assert_eq!(typed["webhookSecret"], "s3cret");
        let cleared = change_of(&form(&[("webhookSecret", "s3cret"), ("clearSecret", "on")]));
        assert_eq!(cleared["webhookSecret"], Value::Null);
        let listed = change_of(&form(&[("targetUsers", "a@x.io, b@x.io\nc@x.io\n\n")]));
        assert_eq!(listed["targetUsers"], json!(["a@x.io", "b@x.io", "c@x.io"]));
    }
}
