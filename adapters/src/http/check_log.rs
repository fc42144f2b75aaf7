//! `/compliance/audit`: the check log, every validation recorded.

use axum::extract::State;
use chrono::{DateTime, Utc};
use compliance_core::{Outcome, Target, Violation};
use serde::{Deserialize, Serialize};

use crate::http::error::ApiError;
use crate::http::extract::{PageParams, Query};
use crate::http::gate::Granted;
use crate::http::response::Paged;
use crate::http::state::AppState;
use crate::services::checks::{self, CheckRecord};

/// One entry of the check log.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CheckEntry {
    id: String,
    org_id: String,
    target: Target,
    /// The entity checked, when the check named one.
    entity_id: Option<String>,
    result: Outcome,
    violations: Vec<Violation>,
    created_at: DateTime<Utc>,
}

impl From<CheckRecord> for CheckEntry {
    fn from(c: CheckRecord) -> Self {
        CheckEntry {
            id: c.id,
            org_id: c.org_id,
            target: c.target,
            entity_id: c.entity_id,
            result: c.result,
            violations: c.violations,
            created_at: c.created_at,
        }
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct CheckQuery {
    #[param(value_type = Option<compliance_core::Target>, inline)]
    target: Option<String>,
    #[param(value_type = Option<compliance_core::Outcome>, inline)]
    result: Option<String>,
    entity_id: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// `GET /compliance/audit`: the check log.
pub(crate) async fn checks(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<CheckQuery>,
) -> Result<Paged<CheckEntry>, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    if q.result
        .as_deref()
        .is_some_and(|r| r.parse::<Outcome>().is_err())
    {
        return Err(ApiError::invalid_field(
            "result",
            "must be pass, warn or block",
        ));
    }
    if q.target
        .as_deref()
        .is_some_and(|t| t.parse::<Target>().is_err())
    {
        return Err(ApiError::invalid_field(
            "target",
            "must be plugin or pipeline",
        ));
    }
    let filter = checks::LogFilter {
        target: q.target.as_deref(),
        result: q.result.as_deref(),
        entity_id: q.entity_id.as_deref(),
    };
    let (items, total) = checks::log(
        &state.infra.store,
        &granted.org,
        filter,
        page.limit,
        page.offset,
    )
    .await?;
    let items = items.into_iter().map(CheckEntry::from).collect();
    Ok(Paged::new("entries", items, total, page))
}
