//! `/compliance/audit`: the check log, every validation recorded.

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;

use crate::http::error::ApiError;
use crate::http::extract::{PageParams, Query};
use crate::http::gate::Granted;
use crate::http::response::paginated;
use crate::http::state::AppState;
use crate::services::checks;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CheckQuery {
    target: Option<String>,
    result: Option<String>,
    entity_id: Option<String>,
    #[serde(flatten)]
    page: PageParams,
}

/// `GET /compliance/audit`: the check log.
pub(crate) async fn checks(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<CheckQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    if q.result
        .as_deref()
        .is_some_and(|r| !["pass", "warn", "block"].contains(&r))
    {
        return Err(ApiError::invalid_field(
            "result",
            "must be pass, warn or block",
        ));
    }
    if q.target
        .as_deref()
        .is_some_and(|t| !["plugin", "pipeline"].contains(&t))
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
    let (items, total) = checks::log(&state, &granted.org, filter, page.limit, page.offset).await?;
    Ok(paginated("entries", items, total, &page))
}
