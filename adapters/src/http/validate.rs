//! `/compliance/validate/{plugin|pipeline}` and their `/dry-run` forms.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use compliance_core::{json_text_depth, AttributeLimits, Target};
use serde::Deserialize;
use serde_json::{json, Value};
use tenancy::Permission;

use crate::error::ApiError;
use crate::http::extract::RawBody;
use crate::http::gate::Granted;
use crate::http::response::ok;
use crate::http::rules::tenant;
use crate::http::state::{AnyCaller, AppState};
use crate::services::checks::{self, Recording};
use crate::services::ServiceError;
use crate::storage::OrgRecord;

/// The validation budget: past it the answer is 503 COMPLIANCE_UNAVAILABLE (the check
/// itself is `services::checks::check_entity`).
pub const BUDGET: Duration = Duration::from_secs(5);

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ValidateBody {
    attributes: Value,
    entity_id: Option<String>,
}

fn target(name: &str) -> Result<Target, ApiError> {
    name.parse()
        .map_err(|_| ApiError::not_found("validation target"))
}

/// Who is validating, and in which organization.
async fn organization(
    state: &AppState,
    caller: &AnyCaller,
    action: &str,
) -> Result<OrgRecord, ApiError> {
    match caller {
        AnyCaller::User(user) => tenant(state, user, Permission::ComplianceRead, false, action)
            .await
            .map(|g: Granted| g.org),
        AnyCaller::Service { org_header, .. } => {
            let org_id = org_header
                .as_deref()
                .ok_or_else(ApiError::tenant_forbidden)?;
            state
                .store
                .organization(org_id)
                .await?
                .ok_or_else(ApiError::tenant_forbidden)
        }
    }
}

async fn validate(
    state: AppState,
    caller: AnyCaller,
    target_name: String,
    RawBody(body): RawBody,
    recording: Recording,
) -> Result<Response, ApiError> {
    let target = target(&target_name)?;
    // One budget for the whole check: the organization, the rules, the evaluation and
    // the exemptions.
    let deadline = tokio::time::Instant::now() + BUDGET;
    let action = match recording {
        Recording::DryRun => "POST /compliance/validate/:target/dry-run",
        Recording::Live => "POST /compliance/validate/:target",
    };
    // A service's validation with a warm cache entry reads nothing from the database.
    let cached = match &caller {
        AnyCaller::Service {
            org_header: Some(org_id),
            ..
        } => state
            .rule_cache
            .get(org_id, target, state.config.compliance.cache_ttl),
        _ => None,
    };
    let (org, set) = match cached {
        Some((org, set)) => ((*org).clone(), Some(set)),
        None => {
            // The gate answers refusals as they are; storage that fails under it, or
            // does not answer in time, is "compliance unavailable" like the rest.
            let org = match tokio::time::timeout_at(deadline, organization(&state, &caller, action))
                .await
            {
                Ok(Ok(org)) => org,
                Ok(Err(e)) if e.status.is_server_error() => {
                    return Err(ServiceError::Unavailable.into())
                }
                Ok(Err(refused)) => return Err(refused),
                Err(_) => return Err(ServiceError::Unavailable.into()),
            };
            (org, None)
        }
    };
    let limits = state.config.attribute_limits();
    let evaluation = checks::check_entity(
        &state,
        &org,
        target,
        set,
        deadline,
        move || parse(&body, limits),
        recording,
    )
    .await?;
    Ok(ok(
        StatusCode::OK,
        json!({"blocked": evaluation.blocked, "violations": evaluation.violations, "exempted": evaluation.exempted}),
    ))
}

/// The body, its depth measured on the text and parsed: its attributes and entity id.
fn parse(body: &[u8], limits: AttributeLimits) -> Result<checks::Prepared, ServiceError> {
    // Measured on the text, before a parser with its own depth limit sees it: the
    // body wraps the attributes, hence the one level more.
    let text = std::str::from_utf8(body)
        .map_err(|_| ServiceError::Malformed("the body is not UTF-8".to_owned()))?;
    let depth = json_text_depth(text).saturating_sub(1);
    if depth > limits.max_depth {
        return Err(ServiceError::Limit(compliance_core::LimitExceeded {
            limit: compliance_core::LimitKind::Depth,
            max: limits.max_depth,
            actual: depth,
        }));
    }
    let request: ValidateBody = serde_json::from_str(text)
        .map_err(|e| ServiceError::Malformed(format!("invalid body: {e}")))?;
    let entity_id = request.entity_id.filter(|e| !e.trim().is_empty());
    Ok((request.attributes, entity_id))
}

/// `POST /compliance/validate/:target`: writes the check log and may notify.
pub(crate) async fn live(
    State(state): State<AppState>,
    caller: AnyCaller,
    Path(target): Path<String>,
    body: RawBody,
) -> Result<Response, ApiError> {
    validate(state, caller, target, body, Recording::Live).await
}

/// `POST /compliance/validate/:target/dry-run`: the same evaluation, nothing written.
pub(crate) async fn dry_run(
    State(state): State<AppState>,
    caller: AnyCaller,
    Path(target): Path<String>,
    body: RawBody,
) -> Result<Response, ApiError> {
    validate(state, caller, target, body, Recording::DryRun).await
}
