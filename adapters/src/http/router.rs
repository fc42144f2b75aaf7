//! The router: every route under `/api`, and the layers around them.

use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tracing::Instrument;

use crate::http::error::ApiError;
use crate::http::state::AppState;

/// The whole application: the route table's routes, and the layers around them.
pub fn router(state: AppState) -> Router {
    let body_limit = state.config.http.body_limit_bytes;
    let api = crate::http::routes::router(&state)
        .layer(DefaultBodyLimit::max(body_limit))
        // Also for the console's requests, which reach these routes directly.
        .layer(middleware::from_fn(refuse_nul_in_uri))
        .with_state(state.clone());
    // The console calls the API's routes in the process (their gate included); its
    // requests are counted in the request metrics under `console:<route>`.
    let inner = api.clone().layer(middleware::from_fn_with_state(
        state.clone(),
        observe_console,
    ));
    let console = crate::console::router(state.clone(), inner);
    api.merge(console)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn(refuse_nul_in_uri))
        .layer(middleware::from_fn_with_state(state, observe))
}

async fn not_found() -> ApiError {
    ApiError::new(crate::code::ErrorCode::NotFound, "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        crate::code::ErrorCode::MethodNotAllowed,
        "method not allowed on this route",
    )
}

/// A NUL (`%00`) in the path or the query is refused at the edge, before any handler
/// or store sees it (PostgreSQL refuses NUL in text; SQLite would keep it): in the
/// path it names nothing (404), in the query it is a bad parameter (400).
async fn refuse_nul_in_uri(request: Request, next: Next) -> Response {
    let uri = request.uri();
    if crate::http::text::encodes_nul(uri.path()) {
        return ApiError::not_found("resource").into_response();
    }
    if uri.query().is_some_and(crate::http::text::encodes_nul) {
        return ApiError::validation("a query parameter holds a NUL character").into_response();
    }
    next.run(request).await
}

/// The console's own requests to the API's routes: counted by method, `console:`
/// and the route's template, and status (bounded as the API's own series).
async fn observe_console(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().to_string();
    let route = request.extensions().get::<MatchedPath>().map_or_else(
        || "console:unmatched".to_owned(),
        |p| format!("console:{}", p.as_str()),
    );
    let response = next.run(request).await;
    state.infra.metrics.observe(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// Request id (taken from `x-request-id` or made), a span for structured logs, the
/// request timeout, and metrics by route and status.
async fn observe(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128)
        .map(str::to_owned)
        .unwrap_or_else(crate::new_id);
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        request.headers_mut().insert("x-request-id", value);
    }
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let span = tracing::info_span!("request", id = %request_id, %method, %route);
    let timeout = state.config.http.request_timeout;
    let mut response =
        match tokio::time::timeout(timeout, next.run(request).instrument(span.clone())).await {
            Ok(response) => response,
            Err(_) => ApiError::new(
                crate::code::ErrorCode::RequestTimeout,
                "the request took too long",
            )
            .into_response(),
        };
    let status = response.status().as_u16();
    let elapsed = started.elapsed();
    state
        .infra
        .metrics
        .observe(&method, &route, status, elapsed);
    span.in_scope(|| {
        tracing::info!(
            status,
            elapsed_ms = elapsed.as_secs_f64() * 1000.0,
            "handled"
        )
    });
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}
