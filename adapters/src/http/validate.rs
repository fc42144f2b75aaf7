//! `/compliance/validate/{plugin|pipeline}` and their `/dry-run` forms.

use axum::extract::{Path, State};
use compliance_core::{json_text_depth, AttributeLimits, Target, Violation};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::http::error::ApiError;
use crate::http::extract::RawBody;
use crate::http::guard::Admitted;
use crate::http::response::Answer;
use crate::http::state::{AnyCaller, AppState};
use crate::services::checks::{self, Recording};
use crate::services::organizations::OrgRecord;
use crate::services::ServiceError;

/// A validation: the attributes of an entity, and its id when it has one (its
/// exemptions then apply, and its snapshot is kept); a dry run may bring the rule
/// being written.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ValidateBody {
    /// The entity's attributes.
    #[schema(value_type = Object)]
    attributes: Value,
    #[schema(max_length = 200)]
    entity_id: Option<String>,
    /// Dry run only (400 on a live check): a rule being written, checked as
    /// `createRule` checks it (400 `VALIDATION_ERROR` with `details.problems`), its
    /// target the path's, evaluated in place of the stored rule with its id, or
    /// beside the organization's other rules when it has none.
    rule: Option<compliance_core::Rule>,
}

/// What a validation found: whether it blocks, the violations left, the ones an
/// approved exemption waived.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Verdict {
    pub blocked: bool,
    pub violations: Vec<Violation>,
    pub exempted: Vec<Violation>,
}

fn target(name: &str) -> Result<Target, ApiError> {
    name.parse()
        .map_err(|_| ApiError::not_found("validation target"))
}

/// The organization of a service's validation (a user's was found by the guard),
/// within the budget.
async fn service_organization(
    state: &AppState,
    org_id: Option<&str>,
    deadline: tokio::time::Instant,
) -> Result<OrgRecord, ApiError> {
    let org_id = org_id.ok_or_else(ApiError::tenant_forbidden)?;
    checks::service_organization(&state.infra.store, org_id, deadline)
        .await?
        .ok_or_else(ApiError::tenant_forbidden)
}

async fn validate(
    state: AppState,
    admitted: Admitted,
    target_name: String,
    RawBody(body): RawBody,
    recording: Recording,
) -> Result<Answer<Verdict>, ApiError> {
    let target = target(&target_name)?;
    let deadline = admitted.deadline;
    let (org, set) = match (admitted.org, &admitted.caller) {
        (Some(org), _) => (org, None),
        (None, AnyCaller::Service { org_header, .. }) => {
            // A service's validation with a warm cache entry reads nothing from the
            // database.
            let cached = org_header.as_deref().and_then(|org_id| {
                state
                    .replica
                    .rule_cache
                    .get(org_id, target, state.config.compliance.cache_ttl)
            });
            match cached {
                Some((org, set)) => ((*org).clone(), Some(set)),
                None => (
                    service_organization(&state, org_header.as_deref(), deadline).await?,
                    None,
                ),
            }
        }
        (None, AnyCaller::User(_)) => {
            return Err(ApiError::internal(
                "a user's validation without its organization",
            ))
        }
    };
    let limits = state.config.attribute_limits();
    // A dry run that may bring a rule being written parses first (the rule decides
    // the set); any other check parses and evaluates in one job. The key is looked
    // for in the bytes, by a literal search: a body without it has no draft, and one
    // written with an escaped key (`"\u0072ule"`) is refused below.
    let may_bring_rule = matches!(recording, Recording::DryRun) && {
        static KEY: std::sync::OnceLock<Option<regex::bytes::Regex>> = std::sync::OnceLock::new();
        KEY.get_or_init(|| regex::bytes::Regex::new(r#""rule""#).ok())
            .as_ref()
            .is_none_or(|key| key.is_match(&body))
    };
    let checks::Checked { evaluation, .. } = if may_bring_rule {
        checks::dry_run(&state, &org, target, set, deadline, move || {
            parse(&body, limits)
        })
        .await?
    } else {
        checks::check_entity(
            &state,
            &org,
            target,
            set,
            deadline,
            move || match parse(&body, limits)? {
                (prepared, None) => Ok(prepared),
                (_, Some(_)) => Err(ServiceError::invalid(
                    "rule",
                    if matches!(recording, Recording::DryRun) {
                        "write the key as `rule` (not escaped)"
                    } else {
                        "only a dry run evaluates a rule being written"
                    },
                )),
            },
            recording,
        )
        .await?
    };
    Ok(Answer::ok(Verdict {
        blocked: evaluation.blocked,
        violations: evaluation.violations,
        exempted: evaluation.exempted,
    }))
}

/// The body, its depth measured on the text and parsed: its attributes and entity id,
/// and the rule a dry run brings.
fn parse(
    body: &[u8],
    limits: AttributeLimits,
) -> Result<(checks::Prepared, Option<compliance_core::Rule>), ServiceError> {
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
    Ok(((request.attributes, entity_id), request.rule))
}

/// `POST /compliance/validate/:target`: writes the check log and may notify.
pub(crate) async fn live(
    State(state): State<AppState>,
    admitted: Admitted,
    Path(target): Path<String>,
    body: RawBody,
) -> Result<Answer<Verdict>, ApiError> {
    validate(state, admitted, target, body, Recording::Live).await
}

/// `POST /compliance/validate/:target/dry-run`: the same evaluation, nothing written.
pub(crate) async fn dry_run(
    State(state): State<AppState>,
    admitted: Admitted,
    Path(target): Path<String>,
    body: RawBody,
) -> Result<Answer<Verdict>, ApiError> {
    validate(state, admitted, target, body, Recording::DryRun).await
}
