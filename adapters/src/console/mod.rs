//! The console: server-rendered pages under `/console` for people who sign in and
//! look. Its pages are clients of the API: each read and action is a request to the
//! API's own router in the process ([`api::Api`]), made with a short token minted
//! for the console session, so they pass the same gate and call the same service
//! functions, and a refusal shows the API's own message. Buttons are shown only
//! where the route table's access for that operation admits the visitor
//! ([`page::Frame::may`]).
//!
//! Every answer carries a strict Content-Security-Policy (scripts and styles only
//! from this origin, no inline code, no framing), `nosniff` and a referrer policy;
//! every state change is a form post checked for its origin and its session's form
//! token. The one script and the one style sheet are embedded in the binary and
//! served under their content hash.

use std::collections::HashMap;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{header, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::http::state::AppState;

mod account;
mod admin;
mod alerts;
pub mod api;
mod assets;
mod audit;
mod billing;
mod chart;
mod conversations;
mod dashboards;
mod diff;
mod governance;
mod inbox;
mod inventory;
pub mod page;
mod people;
mod posture;
mod rules;
mod scans;
pub mod session;
mod settings;
mod sso;
mod templates;
mod verify;

/// What the console's handlers share: the server's state and the API's router.
#[derive(Clone)]
pub struct Console {
    /// The server's state.
    pub state: AppState,
    /// The API (every `/api` route with its gate), called in the process.
    pub api: Router,
}

/// The Content-Security-Policy of every console answer.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; report-uri /console/csp-report";

/// The most a console form may hold.
const FORM_LIMIT: usize = 64 * 1024;

/// The console's routes, `/` (a redirect to it) included.
pub fn router(state: AppState, api: Router) -> Router {
    let console = Console { state, api };
    Router::new()
        .route("/", get(|| async { Redirect::to("/console") }))
        .route(
            "/console",
            get(|| async { Redirect::to("/console/posture") }),
        )
        .route(
            "/console/login",
            get(session::login_page).post(session::login),
        )
        .route("/console/logout", post(session::logout))
        .route(
            "/console/verify-email",
            get(verify::page).post(verify::verify),
        )
        .route("/console/sso/start", get(sso::start))
        .route("/console/sso/callback", get(sso::callback))
        .route("/console/assets/{file}", get(assets::serve))
        .route("/console/csp-report", post(csp_report))
        .route(account::PATH, get(account::page).post(account::action))
        .route(
            people::PATH,
            get(page::get::<people::Page>).post(page::post::<people::Page>),
        )
        .route(settings::PATH, get(settings::page).post(settings::action))
        .route("/console/posture", get(posture::page))
        .route("/console/posture/export.csv", get(posture::csv))
        .route("/console/posture/export.json", get(posture::report))
        .route("/console/rules", get(rules::rules).post(rules::action))
        .route("/console/rules/edit", get(rules::editor).post(rules::edit))
        .route(
            templates::PATH,
            get(page::get::<templates::Page>).post(page::post::<templates::Page>),
        )
        .route(
            "/console/catalog",
            get(governance::catalog).post(governance::catalog_action),
        )
        .route(
            "/console/exemptions",
            get(governance::exemptions).post(governance::exemption_action),
        )
        .route(
            "/console/inventory",
            get(inventory::page).post(inventory::action),
        )
        .route(
            inventory::UPLOAD,
            post(inventory::upload).layer(DefaultBodyLimit::max(
                crate::http::plugins::MAX_UPLOAD_BYTES,
            )),
        )
        .route(
            "/console/scans",
            get(page::get::<scans::Page>).post(page::post::<scans::Page>),
        )
        .route("/console/scans/{id}/progress", get(scans::progress))
        .route("/console/audit", get(audit::page))
        .route("/console/audit/chain.jsonl", get(audit::chain))
        .route("/console/audit/key", get(audit::key))
        .route("/console/billing", get(billing::page).post(billing::action))
        .route(
            "/console/inbox",
            get(page::get::<inbox::Page>).post(page::post::<inbox::Page>),
        )
        .route(
            conversations::PATH,
            get(conversations::page).post(conversations::action),
        )
        .route(conversations::STREAM, get(conversations::stream))
        .route(
            "/console/dashboards",
            get(page::get::<dashboards::Page>).post(page::post::<dashboards::Page>),
        )
        .route(
            "/console/alerts",
            get(page::get::<alerts::Page>).post(page::post::<alerts::Page>),
        )
        .route(admin::USERS, get(admin::users))
        .route("/console/admin/impersonate", post(admin::impersonate))
        .route("/console/impersonation/end", post(admin::end))
        .layer(middleware::from_fn(session::same_origin_only))
        .layer(DefaultBodyLimit::max(FORM_LIMIT))
        .layer(middleware::from_fn(secure_headers))
        .with_state(console)
}

/// The headers of every console answer.
async fn secure_headers(request: Request, next: Next) -> Response {
    let asset = request.uri().path().starts_with("/console/assets/");
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !asset {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// `POST /console/csp-report`: a browser's report of a Content-Security-Policy
/// violation, counted (`console_csp_violations_total`) and logged in one bounded line,
/// at most one a second (anyone may post here: a flood of reports is one counter and
/// a line a second).
async fn csp_report(
    axum::extract::State(console): axum::extract::State<Console>,
    body: axum::body::Bytes,
) -> Response {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST_LOGGED: AtomicI64 = AtomicI64::new(0);
    console.state.infra.metrics.csp_violation();
    let second = chrono::Utc::now().timestamp();
    if LAST_LOGGED.swap(second, Ordering::Relaxed) != second {
        let shown: String = String::from_utf8_lossy(&body).chars().take(512).collect();
        tracing::warn!(report = %shown, "the console's content security policy was violated");
    }
    axum::http::StatusCode::NO_CONTENT.into_response()
}

/// A form's field, trimmed (empty when missing).
pub fn field<'a>(form: &'a HashMap<String, String>, name: &str) -> &'a str {
    form.get(name).map_or("", |v| v.trim())
}
