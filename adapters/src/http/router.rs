//! The router: every route under `/api`, and the layers around them.

use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::Router;
use tracing::Instrument;

use crate::error::ApiError;
use crate::http::state::AppState;
use crate::http::{
    admin, audit, catalog, check_log, exemptions, invitations, members, organizations, policies,
    preferences, rules, system, templates, validate,
};

/// The whole application.
pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/admin/super-admins", get(admin::list))
        .route("/me/organizations", get(organizations::mine))
        .route("/audit/checkpoints", get(audit::checkpoints))
        .route("/audit/checkpoints/key", get(audit::checkpoint_key))
        .route(
            "/admin/super-admins/{user_id}",
            axum::routing::put(admin::grant).delete(admin::revoke),
        )
        .route(
            "/organization",
            get(organizations::active).post(organizations::create),
        )
        .route(
            "/organization/{id}",
            get(organizations::get)
                .put(organizations::update)
                .delete(organizations::delete),
        )
        .route("/organization/{id}/tier", patch(organizations::change_tier))
        .route("/organization/{id}/export", get(organizations::export))
        .route(
            "/organization/{id}/transfer-owner",
            patch(organizations::transfer_owner),
        )
        .route("/organization/{id}/teams", get(organizations::teams))
        .route(
            "/organization/{id}/members",
            get(members::list).post(members::add),
        )
        .route(
            "/organization/{id}/members/bulk-add",
            post(members::bulk_add),
        )
        .route(
            "/organization/{id}/members/{user_id}",
            patch(members::change_role).delete(members::remove),
        )
        .route(
            "/organization/{id}/members/{user_id}/activate",
            patch(members::activate),
        )
        .route(
            "/organization/{id}/members/{user_id}/deactivate",
            patch(members::deactivate),
        )
        .route(
            "/organization/{id}/roles",
            get(members::roles).post(members::create_role),
        )
        .route(
            "/organization/{id}/roles/{role_id}",
            axum::routing::put(members::update_role).delete(members::delete_role),
        )
        .route(
            "/organization/{id}/roles/{role_id}/members",
            post(members::add_role_member),
        )
        .route(
            "/organization/{id}/roles/{role_id}/members/{user_id}",
            axum::routing::delete(members::remove_role_member),
        )
        .route("/invitation/send", post(invitations::send))
        .route("/invitation", get(invitations::list))
        .route(
            "/invitation/{id}",
            axum::routing::delete(invitations::revoke),
        )
        .route("/invitation/{id}/resend", post(invitations::resend))
        .route("/audit", get(audit::query))
        .route("/audit/verify", get(audit::verify))
        .route("/audit/events", post(audit::ingest))
        .route("/compliance/rules", get(rules::list).post(rules::create))
        .route(
            "/compliance/rules/{id}",
            get(rules::get).put(rules::update).delete(rules::delete),
        )
        .route("/compliance/rules/{id}/history", get(rules::history))
        .route("/compliance/published-rules", get(catalog::catalog))
        .route(
            "/compliance/subscriptions",
            get(catalog::list).post(catalog::subscribe),
        )
        .route("/compliance/subscriptions/clone", post(catalog::clone))
        .route(
            "/compliance/subscriptions/auto-subscribe",
            post(catalog::auto_subscribe),
        )
        .route("/compliance/subscriptions/bulk", post(catalog::bulk))
        .route("/compliance/subscriptions/enforced", get(catalog::enforced))
        .route(
            "/compliance/subscriptions/preview/impact",
            post(catalog::impact),
        )
        .route("/compliance/subscriptions/preview", post(catalog::preview))
        .route(
            "/compliance/subscriptions/{rule_id}",
            patch(catalog::set_active).delete(catalog::unsubscribe),
        )
        .route(
            "/compliance/subscriptions/{rule_id}/pin",
            post(catalog::pin).delete(catalog::unpin),
        )
        .route(
            "/compliance/exemptions",
            get(exemptions::list_exemptions).post(exemptions::request),
        )
        .route(
            "/compliance/exemptions/bulk",
            post(exemptions::request_bulk),
        )
        .route(
            "/compliance/exemptions/{id}",
            axum::routing::delete(exemptions::revoke),
        )
        .route(
            "/compliance/exemptions/{id}/review",
            axum::routing::put(exemptions::review),
        )
        .route(
            "/compliance/policies",
            get(policies::list_policies).post(policies::create_policy),
        )
        .route(
            "/compliance/policies/{id}",
            get(policies::get_policy)
                .put(policies::update_policy)
                .delete(policies::delete_policy),
        )
        .route("/compliance/templates", get(templates::templates))
        .route("/compliance/templates/apply", post(templates::apply))
        .route(
            "/compliance/templates/rules/{id}/clone",
            post(templates::clone_rule),
        )
        .route(
            "/compliance/templates/policies/{id}/clone",
            post(templates::clone_policy),
        )
        .route("/compliance/audit", get(check_log::checks))
        .route(
            "/compliance/notification-preferences",
            get(preferences::preferences).put(preferences::save_preferences),
        )
        .route("/compliance/validate/{target}", post(validate::live))
        .route(
            "/compliance/validate/{target}/dry-run",
            post(validate::dry_run),
        );

    let body_limit = state.config.http.body_limit_bytes;
    Router::new()
        .nest("/api", api)
        .route("/health", get(system::health))
        .route("/ready", get(system::ready))
        .route("/metrics", get(system::metrics))
        .route("/openapi.json", get(system::openapi))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "NOT_FOUND", "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
        "method not allowed on this route",
    )
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
        .unwrap_or_else(crate::storage::new_id);
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
                StatusCode::REQUEST_TIMEOUT,
                "REQUEST_TIMEOUT",
                "the request took too long",
            )
            .into_response(),
        };
    let status = response.status().as_u16();
    let elapsed = started.elapsed();
    state.metrics.observe(&method, &route, status, elapsed);
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
