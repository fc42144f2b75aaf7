//! `/compliance/templates`: the system organization's template rules and policies,
//! applied or cloned into an organization (the workflow is `services::templates`).

use axum::extract::{Path, State};
use chrono::Utc;
use serde::{Deserialize, Serialize};

use crate::http::error::ApiError;
use crate::http::extract::Json;
use crate::http::gate::Granted;
use crate::http::policies::Policy;
use crate::http::response::Answer;
use crate::http::rules::OrgRule;
use crate::http::state::{AppState, Caller};
use crate::services::templates;

/// The system organization's template rules and policies.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Templates {
    pub rules: Vec<OrgRule>,
    pub policies: Vec<Policy>,
}

/// `GET /compliance/templates`: the system organization's template rules and policies.
pub(crate) async fn templates(
    State(state): State<AppState>,
) -> Result<Answer<Templates>, ApiError> {
    let (rules, policies) = templates::catalog(&state.infra.store).await?;
    Ok(Answer::ok(Templates {
        rules: rules.into_iter().map(OrgRule::from).collect(),
        policies: policies.into_iter().map(Policy::from).collect(),
    }))
}

/// A template rule to instantiate, and its name in the organization.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ApplyTemplate {
    #[schema(max_length = 200)]
    template_id: String,
    #[schema(max_length = 200)]
    name: Option<String>,
}

/// The copy's name (an empty body keeps the template's).
#[derive(Debug, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CloneBody {
    #[schema(max_length = 200)]
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
) -> Result<Answer<OrgRule>, ApiError> {
    let stored = templates::apply(
        &state.infra.store,
        &state.config,
        &state.replica.rule_cache,
        &caller,
        &granted.org,
        &body.template_id,
        body.name,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(stored.into()))
}

/// `POST /compliance/templates/rules/:id/clone`: an editable copy of a template rule.
pub(crate) async fn clone_rule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    crate::http::extract::RawBody(body): crate::http::extract::RawBody,
) -> Result<Answer<OrgRule>, ApiError> {
    let name = clone_name(&body)?;
    let stored = templates::apply(
        &state.infra.store,
        &state.config,
        &state.replica.rule_cache,
        &caller,
        &granted.org,
        &id,
        name,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(stored.into()))
}

/// `POST /compliance/templates/policies/:id/clone`: a template policy copied with the
/// template rules it groups (each cloned as an org rule).
pub(crate) async fn clone_policy(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    crate::http::extract::RawBody(body): crate::http::extract::RawBody,
) -> Result<Answer<Policy>, ApiError> {
    let name = clone_name(&body)?;
    let policy = templates::clone_policy(
        &state.infra.store,
        &state.config,
        &state.replica.rule_cache,
        &caller,
        &granted.org,
        &id,
        name,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(policy.into()))
}
