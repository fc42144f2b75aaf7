//! The visitor's own account: the password, the authenticator app (enrolled by a QR
//! code drawn on the server, then confirmed with its first code) and personal access
//! tokens (a new one's secret shown once, with a copy button; the list with their
//! last use; revoke one or all).

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{Duration, Utc};
use serde::de::IgnoredAny;
use serde_json::json;

use super::api::{self, segment, Call, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::{self, Posted, Visitor};
use super::{field, Console};
use crate::http::signin::Tokens;
use crate::services::accounts::{Account, Me, PersonalToken, Session, TotpEnrollment};

/// Where the page lives.
pub const PATH: &str = "/console/account";

/// A personal access token as a row.
pub struct TokenRow {
    id: String,
    name: String,
    hint: String,
    org: String,
    permissions: String,
    created_at: String,
    expires_at: String,
    last_used_at: String,
    revoked: bool,
}

/// An authenticator waiting for its first code: its QR code, its secret, and the
/// step-up the confirmation carries.
pub struct Waiting {
    qr: String,
    secret: String,
    step_up: String,
}

#[derive(Template)]
#[template(path = "console/account.html")]
struct AccountPage {
    frame: Frame,
    account: Account,
    tokens: Vec<TokenRow>,
    /// A token just made: its secret, shown this once.
    created: Option<String>,
    waiting: Option<Waiting>,
    /// The organization a new token may be bound to (the one shown).
    expiries: &'static [(u32, &'static str)],
}

/// What a form's answer adds to the page.
#[derive(Default)]
struct Shown {
    outcome: Option<Result<String, Refusal>>,
    created: Option<String>,
    waiting: Option<Waiting>,
}

async fn show(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    shown: Shown,
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(console, visitor, q, ("Your account", PATH)).await?;
    let me: Me = visitor.api.get("/api/me", None).await?;
    let listed: Tokens = visitor.api.get("/api/me/tokens", None).await?;
    let tokens = listed
        .tokens
        .into_iter()
        .map(|t| TokenRow {
            org: t.org_id.unwrap_or_default(),
            permissions: t.permissions.map(|p| p.join(", ")).unwrap_or_default(),
            created_at: api::instant(&t.created_at),
            expires_at: api::instant(&t.expires_at),
            last_used_at: t
                .last_used_at
                .as_ref()
                .map(api::instant)
                .unwrap_or_default(),
            revoked: t.revoked_at.is_some(),
            id: t.id,
            name: t.name,
            hint: t.hint,
        })
        .collect();
    let outcome = match (shown.outcome, q.get("done").map(String::as_str)) {
        (Some(outcome), _) => Some(outcome),
        (None, Some("password")) => Some(Ok(
            "your password was changed; every other session and device was signed out".to_owned(),
        )),
        (None, _) => None,
    };
    let code = frame.settle(outcome);
    Ok(page::render(
        &AccountPage {
            frame,
            account: me.account,
            tokens,
            created: shown.created,
            waiting: shown.waiting,
            expiries: &[
                (7, "7 days"),
                (30, "30 days"),
                (90, "90 days"),
                (365, "a year"),
            ],
        },
        code,
    ))
}

/// `GET /console/account`.
pub async fn page(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show(&console, &visitor, &q, Shown::default())
        .await
        .unwrap_or_else(page::refused)
}

/// The otpauth URI as a QR code, an SVG drawn here (no script, no request elsewhere).
fn qr_svg(uri: &str) -> Result<String, Refusal> {
    use qrcode::render::svg;
    let code = qrcode::QrCode::new(uri.as_bytes())
        .map_err(|e| Refusal::internal(format!("the authenticator's QR code: {e}")))?;
    Ok(code
        .render::<svg::Color<'_>>()
        .min_dimensions(200, 200)
        .quiet_zone(true)
        .dark_color(svg::Color("#000000"))
        .light_color(svg::Color("#ffffff"))
        .build())
}

/// What an action did.
enum Done {
    /// Shown on the page.
    Shown(String),
    /// Every session ended and the API answered a new one (its access token): the
    /// console goes on in it.
    Reopen(String),
    /// Every session ended, this console's too.
    SignedOut,
}

/// `POST /console/account`: `password`, `enroll` and `confirm` (the authenticator,
/// each with a step-up), `create`, `revoke` and `revoke-all` (tokens).
pub async fn action(
    State(console): State<Console>,
    headers: HeaderMap,
    posted: Posted,
) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let mut shown = Shown::default();
    let outcome: Result<Done, Refusal> = async {
        match field(&form, "action") {
            "password" => {
                if form.get("newPassword") != form.get("repeatPassword") {
                    return Err(Refusal::invalid(
                        "the new password and its repetition differ",
                    ));
                }
                let session: Session = visitor
                    .api
                    .data(Call {
                        method: Some(Method::PUT),
                        uri: "/api/me/password",
                        body: Some(json!({
                            "currentPassword": form.get("currentPassword").cloned().unwrap_or_default(),
                            "newPassword": form.get("newPassword").cloned().unwrap_or_default(),
                        })),
                        ..Call::default()
                    })
                    .await?;
                // Every session ended, this console's too: it goes on in the new one.
                Ok(Done::Reopen(session.access_token))
            }
            "enroll" => {
                let proof = visitor
                    .api
                    .step_up(form.get("password").map_or("", String::as_str))
                    .await?;
                let enrollment: TotpEnrollment = visitor
                    .api
                    .data(Call {
                        method: Some(Method::POST),
                        uri: "/api/me/totp",
                        step_up: Some(&proof),
                        ..Call::default()
                    })
                    .await?;
                shown.waiting = Some(Waiting {
                    qr: qr_svg(&enrollment.otpauth_uri)?,
                    secret: enrollment.secret,
                    step_up: proof,
                });
                Ok(Done::Shown("scan the code with your authenticator app, then enter its first code".to_owned()))
            }
            "confirm" => {
                let _: Account = visitor
                    .api
                    .data(Call {
                        method: Some(Method::POST),
                        uri: "/api/me/totp/confirm",
                        body: Some(json!({ "code": field(&form, "code") })),
                        step_up: Some(field(&form, "stepUp")),
                        ..Call::default()
                    })
                    .await?;
                Ok(Done::Shown("the authenticator app is enrolled: signing in and step-ups take its codes".to_owned()))
            }
            "remove-totp" => {
                let proof = visitor
                    .api
                    .step_up(form.get("password").map_or("", String::as_str))
                    .await?;
                let _: Account = visitor
                    .api
                    .data(Call {
                        method: Some(Method::DELETE),
                        uri: "/api/me/totp",
                        step_up: Some(&proof),
                        ..Call::default()
                    })
                    .await?;
                Ok(Done::Shown("the authenticator app was removed".to_owned()))
            }
            "create" => {
                // Any number a form holds: beyond a year the API refuses it with its
                // own message; the arithmetic here never overflows.
                let days: i64 = field(&form, "days").parse().unwrap_or(30);
                let expires_at = api::instant(&(Utc::now() + Duration::days(days.clamp(0, 400))));
                let bound = (field(&form, "bound") == "on" && !org.is_empty()).then_some(&org);
                let body = json!({"name": field(&form, "name"), "expiresAt": expires_at, "orgId": bound});
                let made: PersonalToken = visitor
                    .api
                    .data(Call {
                        method: Some(Method::POST),
                        uri: "/api/me/tokens",
                        body: Some(body),
                        ..Call::default()
                    })
                    .await?;
                shown.created = made.token;
                Ok(Done::Shown(format!("token {} created: copy it now, it is shown only once", made.name)))
            }
            "revoke" => {
                let id = segment(field(&form, "id"))?;
                let _: IgnoredAny = visitor
                    .api
                    .data(Call {
                        method: Some(Method::DELETE),
                        uri: &format!("/api/me/tokens/{id}"),
                        ..Call::default()
                    })
                    .await?;
                Ok(Done::Shown(format!("token {id} revoked")))
            }
            "revoke-all" => {
                let _: IgnoredAny = visitor
                    .api
                    .data(Call {
                        method: Some(Method::POST),
                        uri: "/api/me/tokens/revoke-all",
                        ..Call::default()
                    })
                    .await?;
                // This console session ended with the others.
                Ok(Done::SignedOut)
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    match outcome {
        Ok(Done::SignedOut) => Redirect::to("/console/login").into_response(),
        Ok(Done::Reopen(token)) => {
            let to = format!(
                "{PATH}?{}",
                api::query(&[("org", &org), ("done", "password")])
            );
            session::reopen(&console, &headers, &token, &to).await
        }
        Ok(Done::Shown(notice)) => {
            shown.outcome = Some(Ok(notice));
            show(&console, &visitor, &page::again(org), shown)
                .await
                .unwrap_or_else(page::refused)
        }
        Err(refusal) => {
            shown.outcome = Some(Err(refusal));
            show(&console, &visitor, &page::again(org), shown)
                .await
                .unwrap_or_else(page::refused)
        }
    }
}
