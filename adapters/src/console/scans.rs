//! Scans: start one, watch its progress (the page's script replaces the progress
//! fragment every second while it runs), cancel it; schedules with their next run.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use super::api::{self, act, segment, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};

/// A scan as a row.
pub struct ScanRow {
    id: String,
    target: String,
    status: String,
    scanned: i64,
    total: i64,
    passed: i64,
    warned: i64,
    blocked: i64,
    errors: i64,
    started_at: String,
}

impl ScanRow {
    fn running(&self) -> bool {
        self.status == "running"
    }
}

fn scan_row(s: &Value) -> ScanRow {
    let c = s.get("counts").cloned().unwrap_or(Value::Null);
    ScanRow {
        id: api::text(s, "id"),
        target: api::text(s, "target"),
        status: api::text(s, "status"),
        scanned: api::number(&c, "scanned"),
        total: api::number(&c, "total"),
        passed: api::number(&c, "passed"),
        warned: api::number(&c, "warned"),
        blocked: api::number(&c, "blocked"),
        errors: api::number(&c, "errors"),
        started_at: api::text(s, "startedAt"),
    }
}

/// A schedule as a row.
pub struct ScheduleRow {
    cron: String,
    target: String,
    active: bool,
    next_run_at: String,
    last_run_at: String,
}

#[derive(Template)]
#[template(path = "console/scans.html")]
struct ScansPage {
    frame: Frame,
    scans: Vec<ScanRow>,
    schedules: Vec<ScheduleRow>,
}

#[derive(Template)]
#[template(path = "console/scan_progress.html")]
struct Progress {
    org: String,
    scan: ScanRow,
}

async fn show(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    outcome: Option<Result<String, Refusal>>,
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(console, visitor, q, ("Scans", "/console/scans")).await?;
    if frame.org.is_empty() {
        return Ok(page::empty(frame));
    }
    let scans = frame
        .read(
            visitor,
            ("listScans", "scans"),
            "/api/compliance/scans?limit=20",
        )
        .await?;
    let schedules = frame
        .read(
            visitor,
            ("listScanSchedules", "schedules"),
            "/api/compliance/scan-schedules?limit=50",
        )
        .await?;
    let scans = api::items(&scans).iter().map(scan_row).collect();
    let schedules = api::items(&schedules)
        .iter()
        .map(|s| ScheduleRow {
            cron: api::text(s, "cronExpression"),
            target: api::text(s, "target"),
            active: s.get("isActive").and_then(Value::as_bool).unwrap_or(false),
            next_run_at: api::text(s, "nextRunAt"),
            last_run_at: api::text(s, "lastRunAt"),
        })
        .collect();
    let code = frame.settle(outcome);
    Ok(page::render(
        &ScansPage {
            frame,
            scans,
            schedules,
        },
        code,
    ))
}

/// `GET /console/scans`.
pub async fn page(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show(&console, &visitor, &q, None)
        .await
        .unwrap_or_else(page::refused)
}

/// `GET /console/scans/{id}/progress?org=`: the progress fragment.
pub async fn progress(
    visitor: Visitor,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let org = q.get("org").cloned().unwrap_or_default();
    let shown = async {
        let uri = format!("/api/compliance/scans/{}", segment(&id)?);
        let scan = visitor.api.get(&uri, Some(&org)).await?;
        Ok::<_, Refusal>(page::render(
            &Progress {
                org: org.clone(),
                scan: scan_row(&scan),
            },
            StatusCode::OK,
        ))
    };
    shown.await.unwrap_or_else(page::refused)
}

/// `POST /console/scans`: `start` (a target), `cancel` (a scan).
pub async fn action(State(console): State<Console>, posted: Posted) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let outcome = async {
        match field(&form, "action") {
            "start" => {
                let body = json!({"target": field(&form, "target")});
                let scan = act(
                    &visitor.api,
                    (Method::POST, "/api/compliance/scans"),
                    &org,
                    Some(body),
                )
                .await?;
                Ok(format!("scan {} started", api::text(&scan, "id")))
            }
            "cancel" => {
                let id = segment(field(&form, "id"))?;
                let uri = format!("/api/compliance/scans/{id}/cancel");
                let scan = act(&visitor.api, (Method::POST, &uri), &org, None).await?;
                Ok(format!("scan {id} is {}", api::text(&scan, "status")))
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    show(&console, &visitor, &page::again(org), Some(outcome))
        .await
        .unwrap_or_else(page::refused)
}
