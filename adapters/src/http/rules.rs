//! `/compliance/rules`: an organization's rules, validated by compliance-core.

use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use compliance_core::Rule;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Deleted, Paged};
use crate::http::state::{AppState, Caller};
use crate::services::rules::{self, RuleChange, RuleFilter, StoredRule};

/// A rule as the API answers it: the rule, its organization and its timestamps.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrgRule {
    #[serde(flatten)]
    pub rule: Rule,
    pub org_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Set on a soft-deleted rule (listed with `includeDeleted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<DateTime<Utc>>,
}

impl From<StoredRule> for OrgRule {
    fn from(r: StoredRule) -> Self {
        OrgRule {
            rule: r.rule,
            org_id: r.org_id,
            created_at: r.created_at,
            updated_at: r.updated_at,
            deleted_at: r.deleted_at,
        }
    }
}

/// One version of a rule's history.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleVersion {
    pub version: u32,
    /// `create`, `update` or `delete`, and the fields that changed.
    pub change: Value,
    pub changed_by: String,
    pub changed_at: DateTime<Utc>,
    /// The rule as it was after the change.
    pub rule: Value,
}

impl From<RuleChange> for RuleVersion {
    fn from(c: RuleChange) -> Self {
        RuleVersion {
            version: c.version,
            change: c.change,
            changed_by: c.changed_by,
            changed_at: c.changed_at,
            rule: c.rule,
        }
    }
}

/// Query filters of the rule lists.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct RuleQuery {
    #[param(value_type = Option<compliance_core::Target>, inline)]
    target: Option<String>,
    #[param(value_type = Option<compliance_core::Severity>, inline)]
    severity: Option<String>,
    #[param(value_type = Option<compliance_core::Scope>, inline)]
    scope: Option<String>,
    /// A tag the rule carries.
    tag: Option<String>,
    /// A case-insensitive part of the name.
    name: Option<String>,
    /// Soft-deleted rules too.
    include_deleted: Option<bool>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

impl RuleQuery {
    pub(crate) fn filter(&self) -> Result<RuleFilter, ApiError> {
        let check = |field: &str, value: &Option<String>, allowed: &[&str]| match value {
            Some(v) if !allowed.contains(&v.as_str()) => Err(ApiError::invalid_field(
                field,
                format!("must be one of {}", allowed.join(", ")),
            )),
            _ => Ok(()),
        };
        check("target", &self.target, &["plugin", "pipeline"])?;
        check(
            "severity",
            &self.severity,
            &["warning", "error", "critical"],
        )?;
        check("scope", &self.scope, &["org", "published"])?;
        Ok(RuleFilter {
            target: self.target.clone(),
            severity: self.severity.clone(),
            scope: self.scope.clone(),
            tag: self.tag.clone(),
            name: self.name.clone(),
            is_template: None,
            include_deleted: self.include_deleted.unwrap_or(false),
        })
    }

    pub(crate) fn page(&self) -> &PageParams {
        &self.page
    }
}

/// `GET /compliance/rules`.
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<RuleQuery>,
) -> Result<Paged<OrgRule>, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let filter = q.filter()?;
    let ascending = page.sort_order == SortOrder::Asc;
    let (rules, total) = rules::list(
        &state.infra.store,
        &granted.org,
        &filter,
        (page.limit, page.offset, ascending),
    )
    .await?;
    let rules = rules.into_iter().map(OrgRule::from).collect();
    Ok(Paged::new("rules", rules, total, page))
}

/// `GET /compliance/rules/:id`.
pub(crate) async fn get(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<OrgRule>, ApiError> {
    let rule = rules::get(&state.infra.store, &granted.org, &id, true).await?;
    Ok(Answer::ok(rule.into()))
}

/// `GET /compliance/rules/:id/history`: every version, oldest first.
pub(crate) async fn history(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Vec<RuleVersion>>, ApiError> {
    let history = rules::history(&state.infra.store, &granted.org, &id).await?;
    Ok(Answer::ok(
        history.into_iter().map(RuleVersion::from).collect(),
    ))
}

/// `POST /compliance/rules`: scope defaults to org.
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(rule): Json<Rule>,
) -> Result<Answer<OrgRule>, ApiError> {
    let stored = rules::create(
        &state.infra.store,
        &state.config,
        &state.replica.rule_cache,
        &caller,
        &granted.org,
        rule,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(stored.into()))
}

/// `PUT /compliance/rules/:id`: replaces the rule's fields; its version goes up by one.
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(rule): Json<Rule>,
) -> Result<Answer<OrgRule>, ApiError> {
    let stored = rules::update(
        &state.infra.store,
        &state.config,
        &state.replica.rule_cache,
        &caller,
        &granted.org,
        &id,
        rule,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(stored.into()))
}

/// `DELETE /compliance/rules/:id`: a soft delete; the rule is no longer evaluated.
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    rules::delete(
        &state.infra.store,
        &state.replica.rule_cache,
        &caller,
        &granted.org,
        &id,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(Deleted::new(id)))
}
