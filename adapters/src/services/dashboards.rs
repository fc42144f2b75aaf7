//! Dashboards: a title and at most 24 panels, each one of the reports with that
//! report's own parameters, checked as the report checks them. A dashboard's data
//! is every panel's report, computed by the report service itself (a panel's
//! numbers are the report's). A change carries the version it read: a stale one is
//! 409. Each change is audited in the change's transaction.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::context::{event, Caller};
use super::reports::{self, ReportParams, ReportQuery};
use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::replica::kept::KeptFacts;
use crate::storage::{new_id, unit_of_work, DashboardRow, OrgRecord, Store};
mod data;
pub use data::*;

/// The most panels a dashboard holds.
pub const MAX_PANELS: usize = 24;
/// The longest title, in characters.
pub const MAX_TITLE: usize = 200;

/// How a panel draws its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PanelKind {
    /// One number.
    Stat,
    /// A line over time.
    Timeseries,
    /// Rows.
    Table,
    /// Buckets by rows, shaded by count.
    Heatmap,
}

/// The reports a panel (or an alert) may read: the ten execution and plugin
/// reports, and the compliance posture's trend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum ReportName {
    /// `GET /api/reports/execution/count`.
    #[serde(rename = "execution/count")]
    ExecutionCount,
    /// `GET /api/reports/execution/success-rate`.
    #[serde(rename = "execution/success-rate")]
    SuccessRate,
    /// `GET /api/reports/execution/duration`.
    #[serde(rename = "execution/duration")]
    Duration,
    /// `GET /api/reports/execution/stage-failures`.
    #[serde(rename = "execution/stage-failures")]
    StageFailures,
    /// `GET /api/reports/execution/stage-bottlenecks`.
    #[serde(rename = "execution/stage-bottlenecks")]
    StageBottlenecks,
    /// `GET /api/reports/execution/errors`.
    #[serde(rename = "execution/errors")]
    Errors,
    /// `GET /api/reports/plugins/summary`.
    #[serde(rename = "plugins/summary")]
    PluginSummary,
    /// `GET /api/reports/plugins/build-success-rate`.
    #[serde(rename = "plugins/build-success-rate")]
    BuildSuccessRate,
    /// `GET /api/reports/plugins/build-duration`.
    #[serde(rename = "plugins/build-duration")]
    BuildDuration,
    /// `GET /api/reports/plugins/build-failures`.
    #[serde(rename = "plugins/build-failures")]
    BuildFailures,
    /// `GET /api/reports/compliance/posture-trend`.
    #[serde(rename = "compliance/posture-trend")]
    PostureTrend,
}

impl ReportName {
    /// Every report.
    pub const ALL: [ReportName; 11] = [
        ReportName::ExecutionCount,
        ReportName::SuccessRate,
        ReportName::Duration,
        ReportName::StageFailures,
        ReportName::StageBottlenecks,
        ReportName::Errors,
        ReportName::PluginSummary,
        ReportName::BuildSuccessRate,
        ReportName::BuildDuration,
        ReportName::BuildFailures,
        ReportName::PostureTrend,
    ];

    /// Its name: the report's path under `/api/reports/`.
    pub fn name(self) -> &'static str {
        match self {
            ReportName::ExecutionCount => "execution/count",
            ReportName::SuccessRate => "execution/success-rate",
            ReportName::Duration => "execution/duration",
            ReportName::StageFailures => "execution/stage-failures",
            ReportName::StageBottlenecks => "execution/stage-bottlenecks",
            ReportName::Errors => "execution/errors",
            ReportName::PluginSummary => "plugins/summary",
            ReportName::BuildSuccessRate => "plugins/build-success-rate",
            ReportName::BuildDuration => "plugins/build-duration",
            ReportName::BuildFailures => "plugins/build-failures",
            ReportName::PostureTrend => "compliance/posture-trend",
        }
    }

    /// Reads a report's name.
    pub fn parse(text: &str) -> Option<ReportName> {
        ReportName::ALL.into_iter().find(|r| r.name() == text)
    }
}

/// Where a panel sits on the dashboard's grid (24 columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Position {
    /// Column, 0 to 23.
    pub x: u32,
    /// Row, from 0.
    pub y: u32,
    /// Width in columns, 1 to 24.
    pub w: u32,
    /// Height in rows, 1 to 24.
    pub h: u32,
}

/// A panel, as it is stored and answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Panel {
    /// Its title (default: the report's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// How it draws.
    pub kind: PanelKind,
    /// The report it shows.
    pub report: ReportName,
    /// The report's own query parameters (`from` and `to` come from the
    /// dashboard's range when left out).
    #[schema(value_type = Object)]
    pub params: ReportParams,
    /// Where it sits.
    pub position: Position,
}

/// A dashboard.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Dashboard {
    /// Its id.
    pub id: String,
    /// Its organization.
    pub org_id: String,
    /// Its title.
    pub title: String,
    /// Its panels.
    pub panels: Vec<Panel>,
    /// The version a change must carry.
    pub version: i64,
    /// Who made it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

fn decode(row: DashboardRow) -> ServiceResult<Dashboard> {
    let panels: Vec<Panel> = serde_json::from_value(row.panels).map_err(|e| {
        ServiceError::Broken(format!(
            "dashboards `{}`: the panels do not decode: {e}",
            row.id
        ))
    })?;
    Ok(Dashboard {
        id: row.id,
        org_id: row.org_id,
        title: row.title,
        panels,
        version: row.version,
        created_by: row.created_by,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

/// A dashboard as a request gives it (panels still raw: each is checked here and
/// a bad one named by its index).
#[derive(Debug, Clone)]
pub struct DashboardInput {
    /// The title.
    pub title: String,
    /// The panels, as sent.
    pub panels: Vec<Value>,
}

/// Whether the caller may read the organization's teams.
#[derive(Debug, Clone, Copy)]
pub struct Rollup(pub bool);

fn invalid_panel(index: usize, what: impl std::fmt::Display) -> ServiceError {
    ServiceError::invalid("panels", format!("[{index}].{what}"))
}

/// Checks a panel as sent: its kind, report, parameters (as the report checks
/// them) and position.
pub fn check_panel(
    index: usize,
    raw: &Value,
    rollup: Rollup,
    now: DateTime<Utc>,
) -> ServiceResult<Panel> {
    let Value::Object(map) = raw else {
        return Err(invalid_panel(index, "must be an object"));
    };
    for key in map.keys() {
        if !["title", "kind", "report", "params", "position"].contains(&key.as_str()) {
            return Err(invalid_panel(
                index,
                format_args!("{key}: is not a field of a panel"),
            ));
        }
    }
    let title = match map.get("title") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(
            reports::filter_text("panels", t, MAX_TITLE)
                .map_err(|e| invalid_panel(index, format_args!("title: {}", message_of(&e))))?,
        ),
        Some(_) => return Err(invalid_panel(index, "title: must be text")),
    };
    let kind: PanelKind = map
        .get("kind")
        .cloned()
        .and_then(|k| serde_json::from_value(k).ok())
        .ok_or_else(|| invalid_panel(index, "kind: must be stat, timeseries, table or heatmap"))?;
    let report = map
        .get("report")
        .and_then(Value::as_str)
        .and_then(ReportName::parse)
        .ok_or_else(|| {
            invalid_panel(
                index,
                format_args!(
                    "report: must name a report ({})",
                    ReportName::ALL.map(ReportName::name).join(", ")
                ),
            )
        })?;
    let params = ReportParams::from_json(map.get("params").unwrap_or(&json!({})))
        .map_err(|e| invalid_panel(index, format_args!("params: {e}")))?;
    let checked = params
        .check(now)
        .map_err(|e| invalid_panel(index, format_args!("params.{}", message_of(&e))))?;
    if checked.include_teams && !rollup.0 {
        return Err(ServiceError::Forbidden(
            "the `reports:rollup` permission is required to include the teams",
        ));
    }
    let position: Position = map
        .get("position")
        .cloned()
        .and_then(|p| serde_json::from_value(p).ok())
        .ok_or_else(|| invalid_panel(index, "position: must be {x, y, w, h}"))?;
    if position.x > 23
        || !(1..=24).contains(&position.w)
        || position.x + position.w > 24
        || !(1..=24).contains(&position.h)
        || position.y > 1000
    {
        return Err(invalid_panel(
            index,
            "position: x from 0 to 23, w from 1 to 24 within the 24 columns, h from 1 to 24, y at most 1000",
        ));
    }
    Ok(Panel {
        title,
        kind,
        report,
        params,
        position,
    })
}

fn message_of(error: &ServiceError) -> String {
    match error {
        ServiceError::Invalid { field, message } => format!("{field}: {message}"),
        other => other.to_string(),
    }
}

fn check(
    input: DashboardInput,
    rollup: Rollup,
    now: DateTime<Utc>,
) -> ServiceResult<(String, Vec<Panel>)> {
    let title = reports::filter_text("title", &input.title, MAX_TITLE)?;
    if input.panels.len() > MAX_PANELS {
        return Err(ServiceError::invalid(
            "panels",
            format!("at most {MAX_PANELS} panels"),
        ));
    }
    let panels = input
        .panels
        .iter()
        .enumerate()
        .map(|(i, raw)| check_panel(i, raw, rollup, now))
        .collect::<ServiceResult<Vec<_>>>()?;
    Ok((title, panels))
}

fn panels_json(panels: &[Panel]) -> ServiceResult<Value> {
    serde_json::to_value(panels).map_err(|e| ServiceError::Broken(e.to_string()))
}

/// The organization's dashboards, a page and the total.
pub async fn list(
    store: &Store,
    org: &OrgRecord,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<Dashboard>, u64)> {
    let (rows, total) = store.dashboards(&org.id, limit, offset).await?;
    Ok((
        rows.into_iter().map(decode).collect::<ServiceResult<_>>()?,
        total,
    ))
}

/// One dashboard.
pub async fn get(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<Dashboard> {
    store
        .dashboard(&org.id, id)
        .await?
        .ok_or_else(|| ServiceError::NotFound("dashboard".into()))
        .and_then(decode)
}

/// Makes a dashboard (`dashboard.create`).
pub async fn create(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    input: DashboardInput,
    rollup: Rollup,
    now: DateTime<Utc>,
) -> ServiceResult<Dashboard> {
    let (title, panels) = check(input, rollup, now)?;
    let row = DashboardRow {
        id: new_id(),
        org_id: org.id.clone(),
        title,
        panels: panels_json(&panels)?,
        version: 1,
        created_by: caller.user_id.clone(),
        created_at: now,
        updated_at: now,
    };
    insert(
        store,
        caller,
        row,
        ("dashboard.create", json!({"panels": panels.len()})),
    )
    .await
}

async fn insert(
    store: &Store,
    caller: &Caller,
    row: DashboardRow,
    (action, details): (&str, Value),
) -> ServiceResult<Dashboard> {
    let audit = [event(
        caller,
        action,
        &row.org_id,
        "dashboard",
        &row.id,
        details,
    )];
    unit_of_work!(store, |tx| {
        tx.insert_dashboard(&row).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    decode(row)
}

/// Replaces a dashboard's title and panels when `version` is still its version
/// (`dashboard.update`); a stale version is 409.
pub async fn update(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    (id, version): (&str, i64),
    input: DashboardInput,
    rollup: Rollup,
    now: DateTime<Utc>,
) -> ServiceResult<Dashboard> {
    let (title, panels) = check(input, rollup, now)?;
    let current = get(store, org, id).await?;
    if current.version != version {
        return Err(stale(current.version));
    }
    let row = DashboardRow {
        id: current.id.clone(),
        org_id: org.id.clone(),
        title,
        panels: panels_json(&panels)?,
        version: version + 1,
        created_by: current.created_by.clone(),
        created_at: current.created_at,
        updated_at: now,
    };
    unit_of_work!(store, |tx| {
        if !tx.update_dashboard(&row, version).await? {
            return Err(stale(version));
        }
        tx.enqueue_audit(&[event(
            caller,
            "dashboard.update",
            &org.id,
            "dashboard",
            id,
            json!({"version": row.version, "panels": panels.len()}),
        )])
        .await?;
        Ok(())
    })?;
    decode(row)
}

fn stale(read: i64) -> ServiceError {
    ServiceError::Conflict(format!(
        "the dashboard changed since version {read} was read: read it again and apply the change to the current version"
    ))
}

/// Deletes a dashboard (`dashboard.delete`).
pub async fn delete(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<()> {
    unit_of_work!(store, |tx| {
        if !tx.delete_dashboard(&org.id, id).await? {
            return Err(ServiceError::NotFound("dashboard".into()));
        }
        tx.enqueue_audit(&[event(
            caller,
            "dashboard.delete",
            &org.id,
            "dashboard",
            id,
            json!({}),
        )])
        .await?;
        Ok(())
    })
}

/// Copies a dashboard of `source_org` into `org` (the caller's), audited
/// `dashboard.clone` with the source's id. Its panels are checked again for the
/// caller (a rollup panel needs `reports:rollup` where it lands).
pub async fn clone(
    store: &Store,
    caller: &Caller,
    (source_org, id): (&OrgRecord, &str),
    org: &OrgRecord,
    title: Option<String>,
    rollup: Rollup,
    now: DateTime<Utc>,
) -> ServiceResult<Dashboard> {
    let source = get(store, source_org, id).await?;
    let title = match title {
        Some(t) => reports::filter_text("title", &t, MAX_TITLE)?,
        None => format!("{} (copy)", source.title)
            .chars()
            .take(MAX_TITLE)
            .collect(),
    };
    if source
        .panels
        .iter()
        .any(|p| p.params.include_teams.as_deref() == Some("true"))
        && !rollup.0
    {
        return Err(ServiceError::Forbidden(
            "the `reports:rollup` permission is required to include the teams",
        ));
    }
    let row = DashboardRow {
        id: new_id(),
        org_id: org.id.clone(),
        title,
        panels: panels_json(&source.panels)?,
        version: 1,
        created_by: caller.user_id.clone(),
        created_at: now,
        updated_at: now,
    };
    insert(
        store,
        caller,
        row,
        (
            "dashboard.clone",
            json!({"sourceId": source.id, "sourceOrgId": source.org_id}),
        ),
    )
    .await
}
