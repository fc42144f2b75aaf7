//! `/compliance/templates`: the system organization's template rules and policies,
//! applied or cloned into an organization (the workflow is `services::templates`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::Json;
use crate::http::gate::Granted;
use crate::http::response::ok;
use crate::http::state::{AppState, Caller};
use crate::services::templates;

/// `GET /compliance/templates`: the system organization's template rules and policies.
pub(crate) async fn templates(State(state): State<AppState>) -> Result<Response, ApiError> {
    let (rules, policies) = templates::catalog(&state).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"rules": rules, "policies": policies}),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ApplyTemplate {
    template_id: String,
    name: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CloneBody {
    name: Option<String>,
}

/// The optional `{name}` of a clone request: an empty body is allowed.
fn clone_name(body: &[u8]) -> Result<Option<String>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice::<CloneBody>(body)
        .map(|b| b.name)
        .map_err(|e| ApiError::validation(format!("invalid body: {e}")))
}

/// `POST /compliance/templates/apply`: a template rule instantiated as an org rule.
pub(crate) async fn apply(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<ApplyTemplate>,
) -> Result<Response, ApiError> {
    let stored = templates::apply(
        &state,
        &caller,
        &granted.org,
        &body.template_id,
        body.name,
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::CREATED, stored))
}

/// `POST /compliance/templates/rules/:id/clone`: an editable copy of a template rule.
pub(crate) async fn clone_rule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    crate::http::extract::RawBody(body): crate::http::extract::RawBody,
) -> Result<Response, ApiError> {
    let name = clone_name(&body)?;
    let stored = templates::apply(&state, &caller, &granted.org, &id, name, Utc::now()).await?;
    Ok(ok(StatusCode::CREATED, stored))
}

/// `POST /compliance/templates/policies/:id/clone`: a template policy copied with the
/// template rules it groups (each cloned as an org rule).
pub(crate) async fn clone_policy(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    crate::http::extract::RawBody(body): crate::http::extract::RawBody,
) -> Result<Response, ApiError> {
    let name = clone_name(&body)?;
    let policy =
        templates::clone_policy(&state, &caller, &granted.org, &id, name, Utc::now()).await?;
    Ok(ok(StatusCode::CREATED, policy))
}
