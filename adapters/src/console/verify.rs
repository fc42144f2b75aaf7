//! `/console/verify-email`: where the verification (and invitation) mail's link
//! points. The page posts the link's token to the API's `POST /api/auth/verify-email`,
//! with the password an invited account chooses there.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use axum::Form;
use serde_json::json;

use super::api::{Api, Call};
use super::{assets, page, Console};
use crate::http::signin::Peer;

#[derive(Template)]
#[template(path = "console/verify_email.html")]
struct VerifyPage<'a> {
    token: &'a str,
    error: Option<&'a str>,
    done: bool,
    style: &'static str,
}

fn show(token: &str, error: Option<&str>, done: bool, status: StatusCode) -> Response {
    page::render(
        &VerifyPage {
            token,
            error,
            done,
            style: assets::STYLE.path(),
        },
        status,
    )
}

/// `GET /console/verify-email?token=`.
pub async fn page(Query(query): Query<HashMap<String, String>>) -> Response {
    let token = query.get("token").map_or("", String::as_str);
    if token.is_empty() || token.len() > 512 {
        return show(
            "",
            Some("the link is incomplete: open it from the mail again"),
            false,
            StatusCode::BAD_REQUEST,
        );
    }
    show(token, None, false, StatusCode::OK)
}

/// `POST /console/verify-email`.
pub async fn verify(
    State(console): State<Console>,
    Peer(peer): Peer,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let token = form.get("token").map_or("", String::as_str);
    let password = form.get("password").map_or("", String::as_str);
    let body = if password.is_empty() {
        json!({"token": token})
    } else {
        json!({"token": token, "password": password})
    };
    let api = Api::new(console.api.clone(), None, peer, &headers);
    let answer = api
        .data::<serde::de::IgnoredAny>(Call {
            method: Some(Method::POST),
            uri: "/api/auth/verify-email",
            body: Some(body),
            ..Call::default()
        })
        .await;
    match answer {
        Ok(_) => show(token, None, true, StatusCode::OK),
        Err(refusal) => show(token, Some(&refusal.message), false, refusal.status),
    }
}
