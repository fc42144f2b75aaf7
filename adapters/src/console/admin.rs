//! Platform administration in the console (super-admins): the accounts, and seeing
//! as one of them. An impersonation starts through the API (a step-up with the
//! admin's password, then `POST /api/admin/impersonations`), and the console session
//! becomes one that sees as the user, with a banner on every page, until it is
//! ended from that banner (the admin's own session comes back) or expires.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use chrono::Utc;
use serde_json::json;

use super::api::{self, Call, Refusal};
use super::page::{self, Frame};
use super::session::{self, Posted, Visitor};
use super::{field, Console};
use crate::code::ErrorCode;
use crate::services::admin::impersonation::Started;
use crate::services::admin::users::AdminUser;
use crate::services::console as sessions;
use crate::storage::AccountState;

/// The accounts page.
pub const USERS: &str = "/console/admin/users";

/// An account in the list.
pub struct Row {
    id: String,
    email: String,
    state: &'static str,
    organizations: u64,
    can_impersonate: bool,
}

#[derive(Template)]
#[template(path = "console/admin_users.html")]
struct UsersPage {
    frame: Frame,
    search: String,
    rows: Vec<Row>,
}

fn only_super_admins() -> Refusal {
    Refusal {
        status: StatusCode::FORBIDDEN,
        code: ErrorCode::Forbidden,
        message: "only a super-admin may do this".to_owned(),
    }
}

async fn show(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    outcome: Option<Result<String, Refusal>>,
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(console, visitor, q, ("Users", USERS)).await?;
    if !frame.super_admin {
        return Err(only_super_admins());
    }
    let search = q.get("email").map_or("", |e| e.trim()).to_owned();
    let uri = if search.is_empty() {
        "/api/admin/users?limit=50".to_owned()
    } else {
        format!(
            "/api/admin/users?limit=50&{}",
            api::query(&[("email", &search)])
        )
    };
    let listed = visitor.api.list::<AdminUser>(&uri, None, "users").await?;
    let rows = listed
        .items
        .into_iter()
        .map(|u| Row {
            can_impersonate: matches!(u.state, AccountState::Active | AccountState::Unverified)
                && !u.super_admin,
            state: u.state.name(),
            id: u.user_id,
            email: u.email,
            organizations: u.organizations,
        })
        .collect();
    let code = frame.settle(outcome);
    Ok(page::render(
        &UsersPage {
            frame,
            search,
            rows,
        },
        code,
    ))
}

/// `GET /console/admin/users`.
pub async fn users(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show(&console, &visitor, &q, None)
        .await
        .unwrap_or_else(page::refused)
}

/// `POST /console/admin/impersonate`: the admin's password (a step-up), then the
/// impersonation; the console session becomes the user's.
pub async fn impersonate(
    State(console): State<Console>,
    headers: HeaderMap,
    posted: Posted,
) -> Response {
    let Posted { visitor, form } = posted;
    let started = async {
        let step_up = visitor.api.step_up(field(&form, "password")).await?;
        let minutes: u32 = field(&form, "minutes").parse().unwrap_or(0);
        let started: Started = visitor
            .api
            .data(Call {
                method: Some(Method::POST),
                uri: "/api/admin/impersonations",
                body: Some(json!({
                    "userId": field(&form, "userId"),
                    "reason": field(&form, "reason"),
                    "minutes": minutes,
                    "readOnly": field(&form, "readOnly") == "on",
                })),
                step_up: Some(&step_up),
                ..Call::default()
            })
            .await?;
        Ok::<_, Refusal>(sessions::ImpersonationStarted {
            id: started.id,
            user_id: started.user_id,
            expires_at: started.expires_at,
            read_only: started.read_only,
        })
    }
    .await;
    let started = match started {
        Ok(started) => started,
        Err(refusal) => {
            let q = HashMap::new();
            return show(&console, &visitor, &q, Some(Err(refusal)))
                .await
                .unwrap_or_else(page::refused);
        }
    };
    match sessions::open_impersonation(
        &console.state.infra.store,
        &visitor.session,
        &started,
        Utc::now(),
    )
    .await
    {
        Ok(opened) => session::switch_to(&console, &headers, &opened, "/console"),
        Err(error) => page::failure(&Refusal::from(error)),
    }
}

/// `POST /console/impersonation/end`: the impersonation ends; the admin's own
/// console session comes back.
pub async fn end(State(console): State<Console>, headers: HeaderMap, posted: Posted) -> Response {
    match sessions::end_impersonation(
        &console.state.infra.store,
        &posted.visitor.session,
        Utc::now(),
    )
    .await
    {
        Ok(opened) => session::switch_to(&console, &headers, &opened, USERS),
        Err(error) => page::failure(&Refusal::from(error)),
    }
}
