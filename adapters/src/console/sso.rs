//! Signing in to the console through an organization's identity provider: the
//! sign-in page's form starts it (`/console/sso/start?org=`), the provider sends the
//! browser back to `/console/sso/callback`, which opens a console session. The same
//! service as the API's (`services::sso`), its refusals shown on the sign-in page.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use super::{page, session, Console};
use crate::http::signin::{client_address, Peer};
use crate::http::sso::{binding_cookie, browser_cookie};
use crate::services::sso::{self, Callback, ReturnTo, Route};

/// `GET /console/sso/start?org=`: a page that moves on to the provider (a form's
/// redirect to another site would break the console's `form-action 'self'`).
pub async fn start(
    State(console): State<Console>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let org = query
        .get("org")
        .map(|o| o.trim().to_owned())
        .unwrap_or_default();
    if org.is_empty() || org.len() > 200 {
        return page::login(
            Some("name the organization to sign in to"),
            "",
            axum::http::StatusCode::BAD_REQUEST,
        );
    }
    let started = sso::start(
        &console.state.infra.store,
        &console.state.config,
        &console.state.outbound.sso,
        Route::Org(org),
        ReturnTo::Console,
        Utc::now(),
    )
    .await
    .map_err(crate::http::error::ApiError::from)
    .and_then(|started| {
        let cookie = binding_cookie(&console.state.config, &started.browser)?;
        Ok((started.location, cookie))
    });
    let (location, cookie) = match started {
        Ok(started) => started,
        Err(error) => return page::login(Some(&error.message), "", error.status()),
    };
    let mut response = page::continue_to("Continuing to your identity provider", &location);
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response.into_response()
}

/// `GET /console/sso/callback`: the sign-in finished, a console session opened.
pub async fn callback(
    State(console): State<Console>,
    Peer(peer): Peer,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let client = client_address(&console.state.config, &headers, peer);
    let browser = browser_cookie(&headers);
    let callback = Callback {
        code: query.get("code").cloned(),
        state: query.get("state").cloned(),
        error: query.get("error").cloned(),
    };
    let finished = sso::finish(
        &console.state,
        callback,
        (browser.as_deref(), client),
        ReturnTo::Console,
        Utc::now(),
    )
    .await;
    match finished {
        Ok(finished) => {
            session::open_after_sso(&console, &headers, &finished.session.access_token).await
        }
        Err(error) => {
            let refusal = crate::http::error::ApiError::from(error);
            page::login(Some(&refusal.message), "", refusal.status())
        }
    }
}
