//! `/compliance/validate/{plugin|pipeline}` and their `/dry-run` forms.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use compliance_core::{
    json_text_depth, AttributeLimits, Attributes, Error as CoreError, Evaluation, Target, Waivers,
};
use serde::Deserialize;
use serde_json::{json, Value};
use tenancy::Permission;

use crate::error::ApiError;
use crate::http::extract::RawBody;
use crate::http::gate::Granted;
use crate::http::response::ok;
use crate::http::rules::tenant;
use crate::http::state::{AnyCaller, AppState};
use crate::storage::OrgRecord;

/// The validation budget: past it the answer is 503 COMPLIANCE_UNAVAILABLE.
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

fn limit_error(error: CoreError) -> ApiError {
    match error {
        CoreError::AttributeLimitExceeded(e) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "ATTRIBUTE_LIMIT_EXCEEDED",
            e.to_string(),
        )
        .with_details(json!({"limit": e.limit, "max": e.max, "actual": e.actual})),
        CoreError::AttributesNotObject => {
            ApiError::invalid_field("attributes", "must be a JSON object")
        }
        other => ApiError::validation(other.to_string()),
    }
}

async fn validate(
    state: AppState,
    caller: AnyCaller,
    target_name: String,
    RawBody(body): RawBody,
    dry_run: bool,
) -> Result<Response, ApiError> {
    let target = target(&target_name)?;
    // One budget for everything loaded from storage: the organization, the rules and the
    // exemptions together.
    let deadline = tokio::time::Instant::now() + BUDGET;
    let action = if dry_run {
        "POST /compliance/validate/:target/dry-run"
    } else {
        "POST /compliance/validate/:target"
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
    let org = match &cached {
        Some((org, _)) => (**org).clone(),
        None => within(deadline, organization(&state, &caller, action)).await?,
    };
    // The rule set first (it does not depend on the body): from the cache, or loaded
    // within the budget.
    let set = if org.is_system {
        // The system organization's own entities are never evaluated.
        None
    } else {
        let load = async {
            match &cached {
                Some((_, set)) => Ok(set.clone()),
                None => {
                    crate::compliance::rule_set(
                        &state.store,
                        &state.rule_cache,
                        &state.config,
                        &org,
                        target,
                    )
                    .await
                }
            }
        };
        Some(within(deadline, load).await?)
    };
    // Parsing, measuring and evaluating a document of up to the body limit is CPU work:
    // one job on the evaluation pool, under the same deadline.
    let limits = state.config.attribute_limits();
    let job = state.cpu.run(move || {
        let (document, entity_id) = parse(&body, limits)?;
        // The limits hold for every document, evaluated or not (the system organization).
        let attributes = Attributes::new(&document, &limits).map_err(limit_error)?;
        let evaluation = match &set {
            None => Evaluation::pass(),
            Some(set) => set.evaluate(target, &attributes, &Waivers::none()),
        };
        Ok::<_, ApiError>((document, entity_id, evaluation))
    });
    let (document, entity_id, mut evaluation) = match tokio::time::timeout_at(deadline, job).await {
        Ok(Ok(done)) => done?,
        Ok(Err(_)) | Err(_) => return Err(unavailable()),
    };
    // Exemptions are per entity: known once the body is read, applied after.
    if let (Some(entity), false) = (&entity_id, org.is_system) {
        let load = async {
            Ok::<_, ApiError>(Waivers::for_entity(
                &state.store.approved_exemptions(&org.id, entity).await?,
                entity,
                Utc::now(),
            ))
        };
        evaluation.waive(&within(deadline, load).await?);
    }
    if !dry_run {
        let now = Utc::now();
        let result = if evaluation.blocked {
            "block"
        } else if evaluation.violations.is_empty() {
            "pass"
        } else {
            "warn"
        };
        let violations = serde_json::to_value(&evaluation.violations).unwrap_or(Value::Null);
        state
            .store
            .record_check(
                &org.id,
                target.as_str(),
                entity_id.as_deref(),
                result,
                &violations,
                now,
            )
            .await?;
        if let Some(entity) = &entity_id {
            state
                .store
                .save_snapshot(&org.id, target.as_str(), entity, &document, now)
                .await?;
        }
        let notify = evaluation.blocked
            || (!evaluation.violations.is_empty()
                && state
                    .store
                    .notification_preference(&org.id)
                    .await?
                    .notify_warnings);
        if notify {
            state
                .notifier
                .notify(&org.id, target, entity_id.as_deref(), &evaluation);
        }
    }
    Ok(ok(
        StatusCode::OK,
        json!({"blocked": evaluation.blocked, "violations": evaluation.violations, "exempted": evaluation.exempted}),
    ))
}

/// The body, its depth measured on the text and parsed: its attributes and entity id.
fn parse(body: &[u8], limits: AttributeLimits) -> Result<(Value, Option<String>), ApiError> {
    // Measured on the text, before a parser with its own depth limit sees it: the
    // body wraps the attributes, hence the one level more.
    let text =
        std::str::from_utf8(body).map_err(|_| ApiError::validation("the body is not UTF-8"))?;
    let depth = json_text_depth(text).saturating_sub(1);
    if depth > limits.max_depth {
        return Err(limit_error(CoreError::AttributeLimitExceeded(
            compliance_core::LimitExceeded {
                limit: compliance_core::LimitKind::Depth,
                max: limits.max_depth,
                actual: depth,
            },
        )));
    }
    let request: ValidateBody = serde_json::from_str(text)
        .map_err(|e| ApiError::validation(format!("invalid body: {e}")))?;
    let entity_id = request.entity_id.filter(|e| !e.trim().is_empty());
    Ok((request.attributes, entity_id))
}

/// Storage work under the validation budget: storage that cannot answer in time, or
/// at all, is "compliance unavailable" (fail closed).
async fn within<T>(
    deadline: tokio::time::Instant,
    work: impl std::future::Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    match tokio::time::timeout_at(deadline, work).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(error))
            if error.status == StatusCode::SERVICE_UNAVAILABLE
                || error.status == StatusCode::INTERNAL_SERVER_ERROR =>
        {
            Err(unavailable())
        }
        Ok(Err(error)) => Err(error),
        Err(_) => Err(unavailable()),
    }
}

fn unavailable() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "COMPLIANCE_UNAVAILABLE",
        "the compliance rules could not be loaded in time",
    )
}

/// `POST /compliance/validate/:target`: writes the check log and may notify.
pub(crate) async fn live(
    State(state): State<AppState>,
    caller: AnyCaller,
    Path(target): Path<String>,
    body: RawBody,
) -> Result<Response, ApiError> {
    validate(state, caller, target, body, false).await
}

/// `POST /compliance/validate/:target/dry-run`: the same evaluation, nothing written.
pub(crate) async fn dry_run(
    State(state): State<AppState>,
    caller: AnyCaller,
    Path(target): Path<String>,
    body: RawBody,
) -> Result<Response, ApiError> {
    validate(state, caller, target, body, true).await
}
