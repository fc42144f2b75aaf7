//! `/health`, `/ready`, `/metrics` and `/openapi.json`.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use utoipa::openapi::path::{OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, HttpMethod, InfoBuilder, OpenApi, OpenApiBuilder, Paths, Required,
};

use crate::error::ApiError;
use crate::http::response::ok;
use crate::http::state::AppState;

/// `GET /health`: the process is up.
pub(crate) async fn health() -> Response {
    ok(StatusCode::OK, json!({"status": "ok"}))
}

/// `GET /ready`: the database answers.
pub(crate) async fn ready(State(state): State<AppState>) -> Result<Response, ApiError> {
    state.store.ping().await?;
    Ok(ok(StatusCode::OK, json!({"status": "ready"})))
}

/// `GET /metrics`: Prometheus text.
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    // The outbox: how many of the server's own audit events wait to be chained, and
    // how old the oldest is (absent when the database does not answer).
    let outbox = match state.store.outbox_depth().await {
        Ok(depth) => {
            let age = depth.oldest.map_or(0.0, |oldest| {
                (chrono::Utc::now() - oldest).num_milliseconds().max(0) as f64 / 1000.0
            });
            format!(
                "# HELP audit_outbox_depth Audit events waiting in the outbox.\n# TYPE audit_outbox_depth gauge\naudit_outbox_depth {}\n\
                 # HELP audit_outbox_oldest_age_seconds Age of the oldest event in the outbox.\n# TYPE audit_outbox_oldest_age_seconds gauge\naudit_outbox_oldest_age_seconds {age}\n",
                depth.rows
            )
        }
        Err(_) => String::new(),
    };
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        format!(
            "{}{}{outbox}",
            state.metrics.render(),
            state.audit_counters.render()
        ),
    )
        .into_response()
}

/// `GET /openapi.json`.
pub(crate) async fn openapi() -> Response {
    // The document depends only on the code: built once, served as bytes after.
    static DOCUMENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let body = DOCUMENT.get_or_init(|| serde_json::to_string(&document()).unwrap_or_default());
    ([(header::CONTENT_TYPE, "application/json")], body.as_str()).into_response()
}

/// The routes beyond tenancy's endpoint table: (method, path under /api, who may call it).
pub const OTHER_ROUTES: &[(&str, &str, &str)] = &[
    (
        "POST",
        "/audit/events",
        "a service token; Idempotency-Key header",
    ),
    ("GET", "/audit", "permission `audit:read` (x-org-id)"),
    ("GET", "/audit/verify", "super-admin"),
    ("GET", "/admin/super-admins", "super-admin"),
    (
        "GET",
        "/me/organizations",
        "any user: the organizations they belong to, with their roles",
    ),
    (
        "GET",
        "/audit/checkpoints",
        "permission `audit:read` in `orgId`, or super-admin",
    ),
    (
        "GET",
        "/audit/checkpoints/key",
        "anyone: the checkpoints' verifier key (404 when checkpoints are off)",
    ),
    (
        "PUT",
        "/admin/super-admins/:userId",
        "super-admin, step-up (X-Step-Up-Token)",
    ),
    (
        "DELETE",
        "/admin/super-admins/:userId",
        "super-admin, step-up (X-Step-Up-Token); never the last one",
    ),
    ("GET", "/compliance/rules", "permission `compliance:read`"),
    ("POST", "/compliance/rules", "permission `compliance:write`"),
    (
        "GET",
        "/compliance/rules/{id}",
        "permission `compliance:read`",
    ),
    (
        "PUT",
        "/compliance/rules/{id}",
        "permission `compliance:write`",
    ),
    (
        "DELETE",
        "/compliance/rules/{id}",
        "permission `compliance:write`",
    ),
    (
        "GET",
        "/compliance/rules/{id}/history",
        "permission `compliance:read`",
    ),
    (
        "GET",
        "/compliance/published-rules",
        "permission `compliance:read`",
    ),
    (
        "GET",
        "/compliance/subscriptions",
        "permission `compliance:read`",
    ),
    (
        "POST",
        "/compliance/subscriptions",
        "permission `compliance:write`",
    ),
    (
        "POST",
        "/compliance/subscriptions/clone",
        "permission `compliance:write`",
    ),
    (
        "POST",
        "/compliance/subscriptions/auto-subscribe",
        "permission `compliance:write`",
    ),
    (
        "PATCH",
        "/compliance/subscriptions/{ruleId}",
        "permission `compliance:write`",
    ),
    (
        "POST",
        "/compliance/subscriptions/bulk",
        "permission `compliance:write`",
    ),
    (
        "GET",
        "/compliance/subscriptions/enforced",
        "permission `compliance:read`",
    ),
    (
        "POST",
        "/compliance/subscriptions/preview/impact",
        "permission `compliance:read`",
    ),
    (
        "POST",
        "/compliance/subscriptions/preview",
        "permission `compliance:read`",
    ),
    (
        "POST",
        "/compliance/subscriptions/{ruleId}/pin",
        "permission `compliance:write`",
    ),
    (
        "DELETE",
        "/compliance/subscriptions/{ruleId}/pin",
        "permission `compliance:write`",
    ),
    (
        "DELETE",
        "/compliance/subscriptions/{ruleId}",
        "permission `compliance:write`",
    ),
    (
        "POST",
        "/compliance/validate/{target}",
        "permission `compliance:read`, or a service token (x-org-id)",
    ),
    (
        "POST",
        "/compliance/validate/{target}/dry-run",
        "permission `compliance:read`, or a service token (x-org-id)",
    ),
    (
        "GET",
        "/compliance/policies",
        "permission `compliance:read`",
    ),
    (
        "POST",
        "/compliance/policies",
        "permission `compliance:write`",
    ),
    (
        "GET",
        "/compliance/policies/{id}",
        "permission `compliance:read`",
    ),
    (
        "PUT",
        "/compliance/policies/{id}",
        "permission `compliance:write`",
    ),
    (
        "DELETE",
        "/compliance/policies/{id}",
        "permission `compliance:write`",
    ),
    (
        "GET",
        "/compliance/exemptions",
        "permission `compliance:read`",
    ),
    (
        "POST",
        "/compliance/exemptions",
        "permission `compliance:write`",
    ),
    (
        "POST",
        "/compliance/exemptions/bulk",
        "permission `compliance:write`; at most 500",
    ),
    (
        "PUT",
        "/compliance/exemptions/{id}/review",
        "permission `compliance:review`; not the requester",
    ),
    (
        "DELETE",
        "/compliance/exemptions/{id}",
        "permission `compliance:write`",
    ),
    (
        "GET",
        "/compliance/templates",
        "permission `compliance:read`",
    ),
    (
        "POST",
        "/compliance/templates/apply",
        "permission `compliance:write`",
    ),
    (
        "POST",
        "/compliance/templates/rules/{id}/clone",
        "permission `compliance:write`",
    ),
    (
        "POST",
        "/compliance/templates/policies/{id}/clone",
        "permission `compliance:write`",
    ),
    ("GET", "/compliance/audit", "permission `compliance:read`"),
    (
        "GET",
        "/compliance/notification-preferences",
        "permission `compliance:read`",
    ),
    (
        "PUT",
        "/compliance/notification-preferences",
        "the organization's admins or owner",
    ),
];

fn method(name: &str) -> HttpMethod {
    match name {
        "POST" => HttpMethod::Post,
        "PUT" => HttpMethod::Put,
        "PATCH" => HttpMethod::Patch,
        "DELETE" => HttpMethod::Delete,
        _ => HttpMethod::Get,
    }
}

/// The OpenAPI document, generated from tenancy's endpoint table (the same table the
/// router takes each route's permission from) and the operational endpoints.
pub fn document() -> OpenApi {
    let mut paths = Paths::new();
    for endpoint in tenancy::ENDPOINTS {
        let path = format!(
            "/api{}",
            endpoint
                .path
                .split('/')
                .map(|s| match s.strip_prefix(':') {
                    Some(name) => format!("{{{name}}}"),
                    None => s.to_owned(),
                })
                .collect::<Vec<_>>()
                .join("/")
        );
        let access = match endpoint.access {
            tenancy::Access::Authenticated => "authentication".to_owned(),
            tenancy::Access::Member => "membership".to_owned(),
            tenancy::Access::OwnManagedOrSuperAdmin => {
                "own organization, managed team or super-admin".to_owned()
            }
            tenancy::Access::Permission(p) => format!("permission `{p}`"),
            tenancy::Access::SuperAdmin => "super-admin".to_owned(),
        };
        let mut operation = OperationBuilder::new()
            .summary(Some(format!("{} {}", endpoint.method, endpoint.path)))
            .description(Some(format!(
                "Requires {access}{}. Errors use the envelope {{success: false, statusCode, code, message, details?}}.",
                if endpoint.step_up { " and a fresh step-up token (X-Step-Up-Token)" } else { "" }
            )))
            .security(utoipa::openapi::security::SecurityRequirement::new::<&str, [&str; 0], &str>("bearer", []))
            .parameter(ParameterBuilder::new().name("x-org-id").parameter_in(ParameterIn::Header).required(Required::False));
        for segment in endpoint.path.split('/').filter_map(|s| s.strip_prefix(':')) {
            operation = operation.parameter(
                ParameterBuilder::new()
                    .name(segment)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True),
            );
        }
        paths.add_path_operation(path, vec![method(endpoint.method)], operation.build());
    }
    for (verb, path, access) in OTHER_ROUTES {
        let mut operation = OperationBuilder::new()
            .summary(Some(format!("{verb} {path}")))
            .description(Some(format!(
                "Requires {access}. Errors use the envelope {{success: false, statusCode, code, message, details?}}."
            )))
            .security(utoipa::openapi::security::SecurityRequirement::new::<&str, [&str; 0], &str>("bearer", []))
            .parameter(ParameterBuilder::new().name("x-org-id").parameter_in(ParameterIn::Header).required(Required::False));
        for segment in path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        {
            operation = operation.parameter(
                ParameterBuilder::new()
                    .name(segment)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True),
            );
        }
        paths.add_path_operation(format!("/api{path}"), vec![method(verb)], operation.build());
    }
    for (path, summary) in [
        ("/health", "The process is up"),
        ("/ready", "The database is reachable"),
        ("/metrics", "Prometheus metrics"),
        ("/openapi.json", "This document"),
    ] {
        paths.add_path_operation(
            path,
            vec![HttpMethod::Get],
            OperationBuilder::new().summary(Some(summary)).build(),
        );
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("compliance")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "The governance core of a multi-tenant CI/CD platform: the reference server.",
                ))
                .build(),
        )
        .paths(paths)
        .components(Some(
            ComponentsBuilder::new()
                .security_scheme(
                    "bearer",
                    SecurityScheme::Http(
                        HttpBuilder::new()
                            .scheme(HttpAuthScheme::Bearer)
                            .bearer_format("JWT")
                            .build(),
                    ),
                )
                .build(),
        ))
        .build()
}
