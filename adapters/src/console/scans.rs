//! Scans: start one, watch its progress (the page's script replaces the progress
//! fragment every second while it runs), cancel it; schedules with their next run.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, Query};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::json;

use super::api::{self, act, segment, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::Visitor;
use super::{field, Console};
use crate::http::scans::{Scan, ScanSchedule};

/// A scan as a row.
pub struct ScanRow {
    id: String,
    target: String,
    status: String,
    scanned: u64,
    total: u64,
    passed: u64,
    warned: u64,
    blocked: u64,
    errors: u64,
    started_at: String,
}

impl ScanRow {
    fn running(&self) -> bool {
        self.status == "running"
    }
}

fn scan_row(s: Scan) -> ScanRow {
    let c = s.counts;
    ScanRow {
        id: s.id,
        target: s.target,
        status: s.status,
        scanned: c.scanned,
        total: c.total,
        passed: c.passed,
        warned: c.warned,
        blocked: c.blocked,
        errors: c.errors,
        started_at: api::instant(&s.started_at),
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

/// `GET /console/scans/{id}/progress?org=`: the progress fragment.
pub async fn progress(
    visitor: Visitor,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let org = q.get("org").cloned().unwrap_or_default();
    let shown = async {
        let uri = format!("/api/compliance/scans/{}", segment(&id)?);
        let scan: Scan = visitor.api.get(&uri, Some(&org)).await?;
        Ok::<_, Refusal>(page::render(
            &Progress {
                org: org.clone(),
                scan: scan_row(scan),
            },
            StatusCode::OK,
        ))
    };
    shown.await.unwrap_or_else(page::refused)
}

/// The page: [`page::get`] and [`page::post`] are its handlers.
pub struct Page;

impl page::Acting for Page {
    const PLACE: (&'static str, &'static str) = ("Scans", "/console/scans");

    async fn show(
        _console: &Console,
        visitor: &Visitor,
        mut frame: Frame,
        _q: &HashMap<String, String>,
        outcome: Option<Result<String, Refusal>>,
    ) -> Result<Response, Refusal> {
        let scans = frame
            .list::<Scan>(
                visitor,
                ("listScans", "scans"),
                "/api/compliance/scans?limit=20",
                "scans",
            )
            .await?;
        let schedules = frame
            .list::<ScanSchedule>(
                visitor,
                ("listScanSchedules", "schedules"),
                "/api/compliance/scan-schedules?limit=50",
                "schedules",
            )
            .await?;
        let scans = scans.items.into_iter().map(scan_row).collect();
        let schedules = schedules
            .items
            .into_iter()
            .map(|s| ScheduleRow {
                cron: s.cron_expression,
                target: s.target,
                active: s.is_active,
                next_run_at: s.next_run_at.as_ref().map(api::instant).unwrap_or_default(),
                last_run_at: s.last_run_at.as_ref().map(api::instant).unwrap_or_default(),
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

    /// `POST /console/scans`: `start` (a target), `cancel` (a scan).
    async fn act(
        visitor: &Visitor,
        form: &HashMap<String, String>,
        org: &str,
    ) -> Result<String, Refusal> {
        match field(form, "action") {
            "start" => {
                let body = json!({"target": field(form, "target")});
                let scan: Scan = act(
                    &visitor.api,
                    (Method::POST, "/api/compliance/scans"),
                    org,
                    Some(body),
                )
                .await?;
                Ok(format!("scan {} started", scan.id))
            }
            "cancel" => {
                let id = segment(field(form, "id"))?;
                let uri = format!("/api/compliance/scans/{id}/cancel");
                let scan: Scan = act(&visitor.api, (Method::POST, &uri), org, None).await?;
                Ok(format!("scan {id} is {}", scan.status))
            }
            _ => Err(unknown_action()),
        }
    }
}
