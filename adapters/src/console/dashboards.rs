//! Dashboards: the organization's dashboards, one drawn at a time over a range
//! (the last day, week or month), each panel from `GET /api/dashboards/{id}/data`
//! as a chart drawn on the server ([`super::chart`]), a number or a table. The
//! API's answers are read into types: a field the API renamed is an error on the
//! page, never an empty cell.

use std::collections::HashMap;

use askama::Template;
use axum::http::Method;
use axum::response::Response;
use chrono::{DateTime, Duration, Utc};
use reporting::Summary;
use serde::de::IgnoredAny;
use serde_json::{json, Value};

use super::api::{self, act, segment, Refusal};
use super::chart::{self, Series, Unit};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::Visitor;
use super::{field, Console};
use crate::services::dashboards::{Dashboard, DashboardData, PanelData, PanelKind, ReportAnswer};
use crate::services::posture::{PosturePoint, PostureTrendReport};
use crate::services::reports::{Rate, RateBucket};

/// One panel, drawn.
pub struct Drawn {
    title: String,
    report: String,
    kind: String,
    /// The panel's HTML, made by [`chart`] (every text escaped there).
    html: String,
}

/// A dashboard in the list.
pub struct Entry {
    id: String,
    title: String,
    current: bool,
}

#[derive(Template)]
#[template(path = "console/dashboards.html")]
struct DashboardsPage {
    frame: Frame,
    dashboards: Vec<Entry>,
    current: Option<(String, String, i64)>,
    range: String,
    from: String,
    to: String,
    panels: Vec<Drawn>,
}

/// The ranges a page offers.
const RANGES: [(&str, i64); 3] = [("day", 1), ("week", 7), ("month", 30)];

/// A success rate as a stat, a table or a line.
fn rate_panel(
    (id, title, kind): (&str, &str, PanelKind),
    range: (DateTime<Utc>, DateTime<Utc>),
    overall: &Rate,
    series: &[RateBucket],
) -> String {
    match kind {
        PanelKind::Stat => chart::stat(id, overall.rate, Unit::Ratio),
        PanelKind::Table => chart::table(
            id,
            title,
            &["Succeeded", "Failed", "Rate"],
            &[vec![
                overall.succeeded.to_string(),
                overall.failed.to_string(),
                overall
                    .rate
                    .map_or("no data".to_owned(), |v| Unit::Ratio.show(v)),
            ]],
        ),
        PanelKind::Timeseries | PanelKind::Heatmap => chart::line_chart(
            id,
            title,
            range,
            Unit::Ratio,
            &[Series {
                label: "success rate".to_owned(),
                class: "s0",
                points: series.iter().map(|b| (b.start, b.rate.rate)).collect(),
            }],
        ),
    }
}

/// Durations as a stat (the p95) or a table of what they are of.
fn durations_panel(
    (id, title, kind): (&str, &str, PanelKind),
    overall: Option<&Summary>,
    rows: &[(String, &Summary)],
) -> String {
    match kind {
        PanelKind::Stat => chart::stat(id, overall.map(|s| s.p95), Unit::Millis),
        _ => chart::table(
            id,
            title,
            &["Of", "Runs", "Median (ms)", "p95 (ms)"],
            &rows
                .iter()
                .map(|(of, d)| {
                    vec![
                        of.clone(),
                        d.count.to_string(),
                        format!("{:.0}", d.median),
                        format!("{:.0}", d.p95),
                    ]
                })
                .collect::<Vec<_>>(),
        ),
    }
}

/// Failures as a stat (how many) or a table of why, with each one's share.
fn shares_panel(
    (id, title, kind): (&str, &str, PanelKind),
    failures: u64,
    shares: &[(String, u64, f64)],
) -> String {
    match kind {
        PanelKind::Stat => chart::stat(id, Some(failures as f64), Unit::Count("failures")),
        _ => chart::table(
            id,
            title,
            &["Why", "Failures", "Share"],
            &shares
                .iter()
                .map(|(why, count, share)| {
                    vec![why.clone(), count.to_string(), Unit::Ratio.show(*share)]
                })
                .collect::<Vec<_>>(),
        ),
    }
}

/// Draws one panel's answer, read as the API's own report type.
fn draw(p: &PanelData, range: (DateTime<Utc>, DateTime<Utc>)) -> String {
    let id = format!("panel-{}", p.index);
    let title = p
        .panel
        .title
        .clone()
        .unwrap_or_else(|| p.panel.report.name().to_owned());
    let shape = (id.as_str(), title.as_str(), p.panel.kind);
    match &p.answer {
        ReportAnswer::SuccessRate(r) => rate_panel(shape, range, &r.overall, &r.series),
        ReportAnswer::BuildSuccessRate(r) => rate_panel(shape, range, &r.overall, &r.series),
        ReportAnswer::Duration(r) => durations_panel(
            shape,
            r.overall.as_ref(),
            &r.pipelines
                .iter()
                .map(|k| (k.pipeline_id.clone(), &k.durations))
                .collect::<Vec<_>>(),
        ),
        ReportAnswer::BuildDuration(r) => durations_panel(
            shape,
            r.overall.as_ref(),
            &r.plugins
                .iter()
                .map(|k| (k.plugin_name.clone(), &k.durations))
                .collect::<Vec<_>>(),
        ),
        ReportAnswer::StageBottlenecks(r) => durations_panel(
            shape,
            None,
            &r.stages
                .iter()
                .map(|k| (format!("{} / {}", k.pipeline_id, k.stage), &k.durations))
                .collect::<Vec<_>>(),
        ),
        ReportAnswer::StageFailures(r) => match p.panel.kind {
            PanelKind::Table | PanelKind::Stat => chart::table(
                &id,
                &title,
                &["Pipeline", "Stage", "Failures"],
                &r.stages
                    .iter()
                    .map(|s| {
                        vec![
                            s.pipeline_id.clone(),
                            s.stage.clone(),
                            s.failures.to_string(),
                        ]
                    })
                    .collect::<Vec<_>>(),
            ),
            PanelKind::Timeseries | PanelKind::Heatmap => chart::heatmap(
                &id,
                &title,
                &r.stages
                    .iter()
                    .map(|s| {
                        (
                            format!("{} / {}", s.pipeline_id, s.stage),
                            s.series.iter().map(|b| (b.start, b.count)).collect(),
                        )
                    })
                    .collect::<Vec<_>>(),
            ),
        },
        ReportAnswer::Errors(r) => shares_panel(
            shape,
            r.failures,
            &r.categories
                .iter()
                .map(|c| (api::wire(&c.category), c.count, c.share))
                .collect::<Vec<_>>(),
        ),
        ReportAnswer::BuildFailures(r) => shares_panel(
            shape,
            r.failures,
            &r.reasons
                .iter()
                .map(|c| (c.reason.clone(), c.count, c.share))
                .collect::<Vec<_>>(),
        ),
        ReportAnswer::Count(r) => match p.panel.kind {
            PanelKind::Stat => chart::stat(&id, Some(r.overall.total as f64), Unit::Count("runs")),
            _ => chart::table(
                &id,
                &title,
                &["Pipeline", "Runs", "Succeeded", "Failed"],
                &r.pipelines
                    .iter()
                    .map(|c| {
                        vec![
                            c.pipeline_id.clone(),
                            c.counts.total.to_string(),
                            c.counts.succeeded.to_string(),
                            c.counts.failed.to_string(),
                        ]
                    })
                    .collect::<Vec<_>>(),
            ),
        },
        ReportAnswer::PostureTrend(r) => posture_chart(&id, &title, range, &r.series, p.panel.kind),
        ReportAnswer::PluginSummary(_) => chart::table(
            &id,
            &title,
            &["Report"],
            &[vec![format!(
                "{} is shown in the API",
                p.panel.report.name()
            )]],
        ),
    }
}

fn posture_chart(
    id: &str,
    title: &str,
    range: (DateTime<Utc>, DateTime<Utc>),
    series: &[PosturePoint],
    kind: PanelKind,
) -> String {
    let as_f64 = |v: Option<u64>| v.map(|n| n as f64);
    match kind {
        PanelKind::Stat => chart::stat(
            id,
            as_f64(series.iter().rev().find_map(|p| p.block)),
            Unit::Count("blocked"),
        ),
        _ => chart::line_chart(
            id,
            title,
            range,
            Unit::Count("entities"),
            &[
                Series {
                    label: "blocked".to_owned(),
                    class: "s1",
                    points: series.iter().map(|p| (p.start, as_f64(p.block))).collect(),
                },
                Series {
                    label: "warned".to_owned(),
                    class: "s2",
                    points: series.iter().map(|p| (p.start, as_f64(p.warn))).collect(),
                },
            ],
        ),
    }
}

/// The posture page's trend: blocked and warned entities over the last 30 days.
pub async fn posture_trend(
    visitor: &Visitor,
    frame: &mut Frame,
) -> Result<Option<String>, Refusal> {
    let to = Utc::now();
    let from = to - Duration::days(30);
    let uri = format!(
        "/api/reports/compliance/posture-trend?{}",
        api::query(&[
            ("granularity", "day"),
            (
                "from",
                &from.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
            ("to", &to.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        ])
    );
    let report = frame
        .read::<PostureTrendReport>(visitor, ("reportPostureTrend", "the posture trend"), &uri)
        .await?;
    Ok(report.map(|report| {
        posture_chart(
            "posture-trend",
            "Blocked and warned entities, daily",
            (from, to),
            &report.series,
            PanelKind::Timeseries,
        )
    }))
}

/// The dashboard `create` makes: delivery at a glance.
fn overview() -> Value {
    let at = |x: u32, y: u32, w: u32| json!({"x": x, "y": y, "w": w, "h": 6});
    json!({"title": "Delivery overview", "panels": [
        {"title": "Success rate", "kind": "timeseries", "report": "execution/success-rate", "params": {"granularity": "day"}, "position": at(0, 0, 16)},
        {"title": "p95 duration", "kind": "stat", "report": "execution/duration", "params": {}, "position": at(16, 0, 8)},
        {"title": "Stage failures", "kind": "heatmap", "report": "execution/stage-failures", "params": {"granularity": "day", "limit": 10}, "position": at(0, 6, 24)},
        {"title": "Why executions fail", "kind": "table", "report": "execution/errors", "params": {}, "position": at(0, 12, 12)},
        {"title": "Blocked and warned entities", "kind": "timeseries", "report": "compliance/posture-trend", "params": {"granularity": "day"}, "position": at(12, 12, 12)},
    ]})
}

/// The page: [`page::get`] and [`page::post`] are its handlers.
pub struct Page;

impl page::Acting for Page {
    const PLACE: (&'static str, &'static str) = ("Dashboards", "/console/dashboards");

    async fn show(
        _console: &Console,
        visitor: &Visitor,
        mut frame: Frame,
        q: &HashMap<String, String>,
        outcome: Option<Result<String, Refusal>>,
    ) -> Result<Response, Refusal> {
        let listed = frame
            .list::<Dashboard>(
                visitor,
                ("listDashboards", "dashboards"),
                "/api/dashboards?limit=100&sortOrder=asc",
                "dashboards",
            )
            .await?
            .items;
        let asked = q.get("id").cloned().unwrap_or_default();
        let current = listed
            .iter()
            .find(|d| d.id == asked)
            .or_else(|| listed.first());
        let range = q
            .get("range")
            .filter(|r| RANGES.iter().any(|(name, _)| name == r))
            .cloned()
            .unwrap_or_else(|| "week".to_owned());
        let days = RANGES.iter().find(|(n, _)| *n == range).map_or(7, |r| r.1);
        let to = Utc::now();
        let from = to - Duration::days(days);
        let mut panels = Vec::new();
        let mut error = None;
        if let Some(d) = current {
            let uri = format!(
                "/api/dashboards/{}/data?{}",
                segment(&d.id)?,
                api::query(&[
                    (
                        "from",
                        &from.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    ),
                    ("to", &to.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                ])
            );
            match frame
                .read::<DashboardData>(visitor, ("dashboardData", "the dashboard's data"), &uri)
                .await
            {
                Ok(None) => {}
                Ok(Some(data)) => {
                    let mut placed: Vec<&PanelData> = data.panels.iter().collect();
                    placed.sort_by_key(|p| p.index);
                    for p in placed {
                        panels.push(Drawn {
                            title: p
                                .panel
                                .title
                                .clone()
                                .unwrap_or_else(|| p.panel.report.name().to_owned()),
                            report: p.panel.report.name().to_owned(),
                            kind: api::wire(&p.panel.kind),
                            html: draw(p, (data.from, data.to)),
                        });
                    }
                }
                Err(refusal) if refusal.signed_out() => return Err(refusal),
                Err(refusal) => error = Some(refusal),
            }
        }
        let dashboards = listed
            .iter()
            .map(|d| Entry {
                id: d.id.clone(),
                title: d.title.clone(),
                current: current.is_some_and(|c| c.id == d.id),
            })
            .collect();
        let current = current.map(|d| (d.id.clone(), d.title.clone(), d.version));
        let code = frame.settle(outcome.or(error.map(Err)));
        Ok(page::render(
            &DashboardsPage {
                frame,
                dashboards,
                current,
                range,
                from: from.format("%Y-%m-%d %H:%M").to_string(),
                to: to.format("%Y-%m-%d %H:%M").to_string(),
                panels,
            },
            code,
        ))
    }

    /// `POST /console/dashboards`: `create` the overview, `delete` one.
    async fn act(
        visitor: &Visitor,
        form: &HashMap<String, String>,
        org: &str,
    ) -> Result<String, Refusal> {
        match field(form, "action") {
            "create" => {
                let made: Dashboard = act(
                    &visitor.api,
                    (Method::POST, "/api/dashboards"),
                    org,
                    Some(overview()),
                )
                .await?;
                Ok(format!("dashboard {} made", made.title))
            }
            "delete" => {
                let id = segment(field(form, "id"))?;
                act::<IgnoredAny>(
                    &visitor.api,
                    (Method::DELETE, &format!("/api/dashboards/{id}")),
                    org,
                    None,
                )
                .await?;
                Ok(format!("dashboard {id} deleted"))
            }
            _ => Err(unknown_action()),
        }
    }
}
