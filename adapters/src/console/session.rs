//! Who is looking: the console's session cookie, its anti-forgery token, signing in
//! and out. The cookie holds an opaque id (only its hash is stored); it is
//! `HttpOnly`, `SameSite=Strict`, `Path=/`, and `__Host-` prefixed and `Secure`
//! whenever the browser can keep such a cookie: over TLS (a proxy's
//! `X-Forwarded-Proto: https` with `TRUST_PROXY_HEADERS`) and on loopback, which
//! browsers treat as a secure context.

use std::collections::HashMap;

use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use chrono::Utc;
use serde_json::json;

use super::api::{Api, Call, Refusal};
use super::{page, Console};
use crate::code::ErrorCode;
use crate::http::listener::PeerAddr;
use crate::http::signin::Peer;
use crate::services::console::{self as sessions, ConsoleSessionRecord};

/// The cookie's name where it can be `Secure`.
pub const SECURE_COOKIE: &str = "__Host-compliance_console";
/// The cookie's name over plain HTTP off loopback (a browser refuses a `__Host-`
/// cookie that is not `Secure`).
pub const PLAIN_COOKIE: &str = "compliance_console";

/// A signed-in visitor: the session, the form token its pages carry, and the API as
/// the session reaches it.
pub struct Visitor {
    /// The session.
    pub session: ConsoleSessionRecord,
    /// The token every form posts back.
    pub form_token: String,
    /// The API, with a token minted for this request.
    pub api: Api,
}

fn cookie_value(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SECURE_COOKIE || *name == PLAIN_COOKIE)
        .map(|(_, value)| value)
}

/// Whether the browser can keep a `Secure` cookie from this request's origin.
fn secure_context(console: &Console, headers: &HeaderMap) -> bool {
    let forwarded_https = console.state.config.signin.trust_proxy_headers
        && headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("https"));
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let name = host
        .rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        .map_or(host, |(name, _)| name);
    forwarded_https
        || name == "localhost"
        || name == "[::1]"
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Answers `to` with the session cookie set to `value` for `max_age` seconds.
fn with_cookie(
    console: &Console,
    headers: &HeaderMap,
    (value, max_age): (&str, u64),
    to: &str,
) -> Response {
    with_cookie_on(
        console,
        headers,
        (value, max_age),
        Redirect::to(to).into_response(),
    )
}

/// Opens a console session for a session's access token (a sign-in through an
/// identity provider) and moves on to the console by a page of its own: the
/// browser arrives from the provider's site, and a redirect in that chain would not
/// carry the `SameSite=Strict` cookie.
pub(crate) async fn open_after_sso(
    console: &Console,
    headers: &HeaderMap,
    token: &str,
) -> Response {
    match sessions::open(
        &console.state.infra.store,
        &console.state.infra.keys,
        token,
        Utc::now(),
    )
    .await
    {
        Ok(opened) => {
            let max_age = sessions::CONSOLE_SESSION_LIFETIME.as_secs();
            with_cookie_on(
                console,
                headers,
                (&opened.cookie, max_age),
                page::continue_to("Signed in", "/console"),
            )
        }
        Err(error) => page::failure(&Refusal::from(error)),
    }
}

/// Opens a console session for a new session's access token (the one a password
/// change answers with, every other session having ended) and moves on to `to` with
/// its cookie.
pub(crate) async fn reopen(
    console: &Console,
    headers: &HeaderMap,
    token: &str,
    to: &str,
) -> Response {
    match sessions::open(
        &console.state.infra.store,
        &console.state.infra.keys,
        token,
        Utc::now(),
    )
    .await
    {
        Ok(opened) => switch_to(console, headers, &opened, to),
        Err(error) => page::failure(&Refusal::from(error)),
    }
}

/// Answers a redirect to `to` that gives the browser `opened`'s cookie (the one it
/// had is replaced).
pub(crate) fn switch_to(
    console: &Console,
    headers: &HeaderMap,
    opened: &sessions::Opened,
    to: &str,
) -> Response {
    let max_age = u64::try_from((opened.session.expires_at - Utc::now()).num_seconds())
        .unwrap_or(0)
        .max(1);
    with_cookie(console, headers, (&opened.cookie, max_age), to)
}

fn with_cookie_on(
    console: &Console,
    headers: &HeaderMap,
    (value, max_age): (&str, u64),
    mut response: Response,
) -> Response {
    let text = if secure_context(console, headers) {
        format!(
            "{SECURE_COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; Secure; SameSite=Strict"
        )
    } else {
        format!("{PLAIN_COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict")
    };
    match HeaderValue::from_str(&text) {
        Ok(cookie) => {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
            response
        }
        Err(error) => page::failure(&Refusal {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: ErrorCode::InternalError,
            message: format!("the session cookie could not be written: {error}"),
        }),
    }
}

fn to_login() -> Response {
    Redirect::to("/console/login").into_response()
}

impl FromRequestParts<Console> for Visitor {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, console: &Console) -> Result<Self, Response> {
        let Some(cookie) = cookie_value(&parts.headers) else {
            return Err(to_login());
        };
        let now = Utc::now();
        let session = match sessions::resume(&console.state.infra.store, cookie, now).await {
            Ok(Some(session)) => session,
            Ok(None) => return Err(to_login()),
            Err(error) => return Err(page::failure(&Refusal::from(error))),
        };
        let bearer = sessions::access_token(&console.state.infra.keys, &session, now)
            .map_err(|e| page::failure(&Refusal::from(e)))?;
        let peer = parts
            .extensions
            .get::<ConnectInfo<PeerAddr>>()
            .map(|ConnectInfo(peer)| peer.0);
        Ok(Visitor {
            form_token: sessions::form_token(cookie),
            session,
            api: Api::new(console.api.clone(), Some(bearer), peer, &parts.headers),
        })
    }
}

/// A form a signed-in visitor posted, with this session's form token (checked).
pub struct Posted {
    /// Who posted it.
    pub visitor: Visitor,
    /// Its fields.
    pub form: HashMap<String, String>,
}

impl FromRequest<Console> for Posted {
    type Rejection = Response;

    async fn from_request(request: Request, console: &Console) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let visitor = Visitor::from_request_parts(&mut parts, console).await?;
        let Form(form) = Form::<HashMap<String, String>>::from_request(
            Request::from_parts(parts, body),
            console,
        )
        .await
        .map_err(IntoResponse::into_response)?;
        let form = visitor.posted(form).map_err(|r| page::failure(&r))?;
        Ok(Posted { visitor, form })
    }
}

impl Visitor {
    /// The fields of a posted form, when it carries this session's form token.
    pub fn posted(
        &self,
        form: HashMap<String, String>,
    ) -> Result<HashMap<String, String>, Refusal> {
        match form.get("csrf") {
            Some(token) if constant_eq(token.as_bytes(), self.form_token.as_bytes()) => Ok(form),
            _ => Err(forged()),
        }
    }
}

fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.ct_eq(b))
}

fn forged() -> Refusal {
    Refusal {
        status: StatusCode::FORBIDDEN,
        code: ErrorCode::CrossSiteRequest,
        message: "this form did not come from this console's own page".to_owned(),
    }
}

/// Refuses a state-changing request another site's page sent: the browser's
/// `Sec-Fetch-Site` must say same-origin (or a typed address), and an `Origin` must
/// name this host. (The form token is checked as well, by each action.)
pub async fn same_origin_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let headers = request.headers();
        let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
        if site.is_some_and(|s| s != "same-origin" && s != "none") {
            return page::failure(&forged());
        }
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin_host = origin
                .to_str()
                .ok()
                .and_then(|o| o.split_once("://"))
                .map(|(_, rest)| rest);
            if origin_host.is_none() || origin_host != host {
                return page::failure(&forged());
            }
        }
    }
    next.run(request).await
}

/// `GET /console/login`.
pub async fn login_page(State(console): State<Console>, headers: HeaderMap) -> Response {
    if let Some(cookie) = cookie_value(&headers) {
        if let Ok(Some(_)) = sessions::resume(&console.state.infra.store, cookie, Utc::now()).await
        {
            return Redirect::to("/console").into_response();
        }
    }
    page::login(None, "", StatusCode::OK)
}

/// `POST /console/login`: the API's sign-in, then a console session.
pub(crate) async fn login(
    State(console): State<Console>,
    Peer(peer): Peer,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let identifier = form.get("identifier").cloned().unwrap_or_default();
    let password = form.get("password").cloned().unwrap_or_default();
    let api = Api::new(console.api.clone(), None, peer, &headers);
    let answer = api
        .data::<crate::services::accounts::Session>(Call {
            method: Some(Method::POST),
            uri: "/api/auth/login",
            body: Some(json!({"identifier": identifier, "password": password})),
            ..Call::default()
        })
        .await;
    let signed_in = match answer {
        Ok(session) => session,
        Err(refusal) => return page::login(Some(&refusal.message), &identifier, refusal.status),
    };
    match sessions::open(
        &console.state.infra.store,
        &console.state.infra.keys,
        &signed_in.access_token,
        Utc::now(),
    )
    .await
    {
        Ok(opened) => {
            let max_age = sessions::CONSOLE_SESSION_LIFETIME.as_secs();
            with_cookie(&console, &headers, (&opened.cookie, max_age), "/console")
        }
        Err(error) => page::failure(&Refusal::from(error)),
    }
}

/// `POST /console/logout`.
pub async fn logout(State(console): State<Console>, headers: HeaderMap, _: Posted) -> Response {
    if let Some(cookie) = cookie_value(&headers) {
        if let Err(error) = sessions::close(&console.state.infra.store, cookie, Utc::now()).await {
            return page::failure(&Refusal::from(error));
        }
    }
    with_cookie(&console, &headers, ("", 0), "/console/login")
}
