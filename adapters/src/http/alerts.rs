//! `/api/alerts/*`: alert rules, destinations, the firing list, history and
//! backtests (`reports:read` to read, `alerts:write` to change and to test).

use axum::extract::{Path, State};
use chrono::Utc;
use serde::Serialize;
use tenancy::Permission;

use crate::http::error::ApiError;
use crate::http::extract::Json;
use crate::http::gate::Granted;
use crate::http::response::{Answer, Deleted};
use crate::http::state::{AppState, Caller};
use crate::services::alerts::{
    self, AlertRule, AlertRuleBody, Backtest, BacktestBody, Destination, DestinationBody,
    HistoryEntry, TestResult,
};

fn rollup(granted: &Granted) -> bool {
    granted.super_admin || granted.permissions.contains(&Permission::ReportsRollup)
}

fn version_of(version: Option<i64>) -> Result<i64, ApiError> {
    version.ok_or_else(|| ApiError::invalid_field("version", "is required: the version read"))
}

/// A list of rules.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct RuleList {
    pub rules: Vec<AlertRule>,
}

/// A list of destinations.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct DestinationList {
    pub destinations: Vec<Destination>,
}

/// A rule's history.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct History {
    /// The rule.
    #[serde(rename = "ruleId")]
    pub rule_id: String,
    /// Its transitions, newest first, each with its deliveries.
    pub transitions: Vec<HistoryEntry>,
}

/// `GET /api/alerts/rules`.
pub(crate) async fn rules(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<RuleList>, ApiError> {
    Ok(Answer::ok(RuleList {
        rules: alerts::rules(&state.infra.store, &granted.org).await?,
    }))
}

/// `GET /api/alerts/firing`.
pub(crate) async fn firing(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<RuleList>, ApiError> {
    Ok(Answer::ok(RuleList {
        rules: alerts::firing(&state.infra.store, &granted.org).await?,
    }))
}

/// `POST /api/alerts/rules`.
pub(crate) async fn create_rule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<AlertRuleBody>,
) -> Result<Answer<AlertRule>, ApiError> {
    Ok(Answer::created(
        alerts::create_rule(
            &state.infra.store,
            &state.config,
            &caller,
            &granted.org,
            &body,
            rollup(&granted),
            Utc::now(),
        )
        .await?,
    ))
}

/// `GET /api/alerts/rules/{id}`.
pub(crate) async fn rule(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<AlertRule>, ApiError> {
    Ok(Answer::ok(
        alerts::rule(&state.infra.store, &granted.org, &id).await?,
    ))
}

/// `PUT /api/alerts/rules/{id}`.
pub(crate) async fn update_rule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<AlertRuleBody>,
) -> Result<Answer<AlertRule>, ApiError> {
    let version = version_of(body.version)?;
    Ok(Answer::ok(
        alerts::update_rule(
            &state.infra.store,
            &state.config,
            &caller,
            &granted.org,
            (&id, version),
            &body,
            rollup(&granted),
            Utc::now(),
        )
        .await?,
    ))
}

/// `DELETE /api/alerts/rules/{id}`.
pub(crate) async fn delete_rule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    alerts::delete_rule(&state.infra.store, &caller, &granted.org, &id, Utc::now()).await?;
    Ok(Answer::ok(Deleted::new(id)))
}

/// `GET /api/alerts/rules/{id}/history`.
pub(crate) async fn history(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<History>, ApiError> {
    let transitions = alerts::history(&state.infra.store, &granted.org, &id).await?;
    Ok(Answer::ok(History {
        rule_id: id,
        transitions,
    }))
}

/// `POST /api/alerts/rules/backtest`.
pub(crate) async fn backtest(
    State(state): State<AppState>,
    granted: Granted,
    Json(body): Json<BacktestBody>,
) -> Result<Answer<Backtest>, ApiError> {
    Ok(Answer::ok(
        alerts::backtest(
            &state.infra.store,
            &state.config,
            &state.infra.reporting,
            &granted.org,
            &body,
            rollup(&granted),
            Utc::now(),
        )
        .await?,
    ))
}

/// `GET /api/alerts/destinations`.
pub(crate) async fn destinations(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<DestinationList>, ApiError> {
    Ok(Answer::ok(DestinationList {
        destinations: alerts::destinations(&state.infra.store, &granted.org).await?,
    }))
}

/// `POST /api/alerts/destinations`.
pub(crate) async fn create_destination(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<DestinationBody>,
) -> Result<Answer<Destination>, ApiError> {
    Ok(Answer::created(
        alerts::create_destination(
            &state.infra.store,
            &state.config,
            &state.outbound.keyring,
            &caller,
            &granted.org,
            &body,
            Utc::now(),
        )
        .await?,
    ))
}

/// `GET /api/alerts/destinations/{id}`.
pub(crate) async fn destination(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Destination>, ApiError> {
    Ok(Answer::ok(
        alerts::destination(&state.infra.store, &granted.org, &id).await?,
    ))
}

/// `PUT /api/alerts/destinations/{id}`.
pub(crate) async fn update_destination(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<DestinationBody>,
) -> Result<Answer<Destination>, ApiError> {
    let version = version_of(body.version)?;
    Ok(Answer::ok(
        alerts::update_destination(
            &state.infra.store,
            &state.config,
            &state.outbound.keyring,
            &caller,
            &granted.org,
            (&id, version),
            &body,
            Utc::now(),
        )
        .await?,
    ))
}

/// `DELETE /api/alerts/destinations/{id}`.
pub(crate) async fn delete_destination(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    alerts::delete_destination(&state.infra.store, &caller, &granted.org, &id).await?;
    Ok(Answer::ok(Deleted::new(id)))
}

/// `POST /api/alerts/destinations/{id}/test`.
pub(crate) async fn test_saved(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<TestResult>, ApiError> {
    Ok(Answer::ok(
        alerts::test(&state, &caller, &granted.org, Ok(&id), Utc::now()).await?,
    ))
}

/// `POST /api/alerts/destinations/test`.
pub(crate) async fn test_unsaved(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<DestinationBody>,
) -> Result<Answer<TestResult>, ApiError> {
    Ok(Answer::ok(
        alerts::test(&state, &caller, &granted.org, Err(&body), Utc::now()).await?,
    ))
}
