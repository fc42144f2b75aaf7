//! Dashboards: the organization's dashboards, one drawn at a time over a range
//! (the last day, week or month), each panel from `GET /api/dashboards/{id}/data`
//! as a chart drawn on the server ([`super::chart`]), a number or a table. The
//! API's answers are read into types: a field the API renamed is an error on the
//! page, never an empty cell.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use serde_json::{json, Value};

use super::api::{self, act, segment, Refusal};
use super::chart::{self, Series, Unit};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};

/// Reads an API answer into its type (a field it does not have is an error).
pub fn decode<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> Result<T, Refusal> {
    serde_json::from_value(value)
        .map_err(|e| Refusal::internal(format!("the API's {what} does not read: {e}")))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    id: String,
    title: String,
    version: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    panels: Vec<PanelData>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PanelData {
    index: usize,
    panel: PanelView,
    answer: Answer,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PanelView {
    title: Option<String>,
    kind: String,
    report: String,
}

#[derive(Deserialize)]
struct Answer {
    report: String,
    data: Value,
}

#[derive(Deserialize)]
struct Rate {
    rate: Option<f64>,
    succeeded: u64,
    failed: u64,
}

#[derive(Deserialize)]
struct RateBucket {
    start: DateTime<Utc>,
    rate: Option<f64>,
}

#[derive(Deserialize)]
struct RateReport {
    overall: Rate,
    series: Vec<RateBucket>,
}

#[derive(Deserialize)]
struct Summary {
    count: u64,
    p95: f64,
    median: f64,
}

#[derive(Deserialize)]
struct Keyed {
    #[serde(default, rename = "pipelineId")]
    pipeline_id: Option<String>,
    #[serde(default, rename = "pluginName")]
    plugin_name: Option<String>,
    #[serde(default)]
    stage: Option<String>,
    durations: Summary,
}

#[derive(Deserialize)]
struct DurationReport {
    overall: Option<Summary>,
    #[serde(default, alias = "plugins", alias = "stages")]
    pipelines: Vec<Keyed>,
}

#[derive(Deserialize)]
struct CountBucket {
    start: DateTime<Utc>,
    count: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StageRow {
    pipeline_id: String,
    stage: String,
    failures: u64,
    series: Vec<CountBucket>,
}

#[derive(Deserialize)]
struct StageReport {
    stages: Vec<StageRow>,
}

#[derive(Deserialize)]
struct Share {
    #[serde(alias = "reason")]
    category: String,
    count: u64,
    share: f64,
}

#[derive(Deserialize)]
struct ShareReport {
    failures: u64,
    #[serde(alias = "reasons")]
    categories: Vec<Share>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Counts {
    total: u64,
    succeeded: u64,
    failed: u64,
    #[serde(default)]
    pipeline_id: Option<String>,
}

#[derive(Deserialize)]
struct CountReport {
    overall: Counts,
    pipelines: Vec<Counts>,
}

#[derive(Deserialize)]
struct PosturePoint {
    start: DateTime<Utc>,
    warn: Option<u64>,
    block: Option<u64>,
}

#[derive(Deserialize)]
struct PostureReport {
    series: Vec<PosturePoint>,
}

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

/// Draws one panel's answer.
fn draw(p: &PanelData, range: (DateTime<Utc>, DateTime<Utc>)) -> Result<String, Refusal> {
    let id = format!("panel-{}", p.index);
    let title = p
        .panel
        .title
        .clone()
        .unwrap_or_else(|| p.panel.report.clone());
    let data = p.answer.data.clone();
    let kind = p.panel.kind.as_str();
    Ok(match p.answer.report.as_str() {
        "execution/success-rate" | "plugins/build-success-rate" => {
            let r: RateReport = decode(data, "rate report")?;
            match kind {
                "stat" => chart::stat(&id, r.overall.rate, Unit::Ratio),
                "table" => chart::table(
                    &id,
                    &title,
                    &["Succeeded", "Failed", "Rate"],
                    &[vec![
                        r.overall.succeeded.to_string(),
                        r.overall.failed.to_string(),
                        r.overall
                            .rate
                            .map_or("no data".to_owned(), |v| Unit::Ratio.show(v)),
                    ]],
                ),
                _ => chart::line_chart(
                    &id,
                    &title,
                    range,
                    Unit::Ratio,
                    &[Series {
                        label: "success rate".to_owned(),
                        class: "s0",
                        points: r.series.iter().map(|b| (b.start, b.rate)).collect(),
                    }],
                ),
            }
        }
        "execution/duration" | "plugins/build-duration" | "execution/stage-bottlenecks" => {
            let r: DurationReport = decode(data, "duration report")?;
            match kind {
                "stat" => chart::stat(&id, r.overall.as_ref().map(|s| s.p95), Unit::Millis),
                _ => chart::table(
                    &id,
                    &title,
                    &["Of", "Runs", "Median (ms)", "p95 (ms)"],
                    &r.pipelines
                        .iter()
                        .map(|k| {
                            let of = [&k.pipeline_id, &k.plugin_name, &k.stage]
                                .iter()
                                .filter_map(|v| v.as_deref())
                                .collect::<Vec<_>>()
                                .join(" / ");
                            vec![
                                of,
                                k.durations.count.to_string(),
                                format!("{:.0}", k.durations.median),
                                format!("{:.0}", k.durations.p95),
                            ]
                        })
                        .collect::<Vec<_>>(),
                ),
            }
        }
        "execution/stage-failures" => {
            let r: StageReport = decode(data, "stage failure report")?;
            match kind {
                "table" | "stat" => chart::table(
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
                _ => chart::heatmap(
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
            }
        }
        "execution/errors" | "plugins/build-failures" => {
            let r: ShareReport = decode(data, "failure report")?;
            match kind {
                "stat" => chart::stat(&id, Some(r.failures as f64), Unit::Count("failures")),
                _ => chart::table(
                    &id,
                    &title,
                    &["Why", "Failures", "Share"],
                    &r.categories
                        .iter()
                        .map(|c| {
                            vec![
                                c.category.clone(),
                                c.count.to_string(),
                                Unit::Ratio.show(c.share),
                            ]
                        })
                        .collect::<Vec<_>>(),
                ),
            }
        }
        "execution/count" => {
            let r: CountReport = decode(data, "count report")?;
            match kind {
                "stat" => chart::stat(&id, Some(r.overall.total as f64), Unit::Count("runs")),
                _ => chart::table(
                    &id,
                    &title,
                    &["Pipeline", "Runs", "Succeeded", "Failed"],
                    &r.pipelines
                        .iter()
                        .map(|c| {
                            vec![
                                c.pipeline_id.clone().unwrap_or_default(),
                                c.total.to_string(),
                                c.succeeded.to_string(),
                                c.failed.to_string(),
                            ]
                        })
                        .collect::<Vec<_>>(),
                ),
            }
        }
        "compliance/posture-trend" => {
            let r: PostureReport = decode(data, "posture trend")?;
            posture_chart(&id, &title, range, &r.series, kind)
        }
        _ => chart::table(
            &id,
            &title,
            &["Report"],
            &[vec![format!("{} is shown in the API", p.answer.report)]],
        ),
    })
}

fn posture_chart(
    id: &str,
    title: &str,
    range: (DateTime<Utc>, DateTime<Utc>),
    series: &[PosturePoint],
    kind: &str,
) -> String {
    let as_f64 = |v: Option<u64>| v.map(|n| n as f64);
    match kind {
        "stat" => chart::stat(
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
    let answer = frame
        .read(visitor, ("reportPostureTrend", "the posture trend"), &uri)
        .await?;
    if answer.is_null() {
        return Ok(None);
    }
    let report: PostureReport = decode(answer, "posture trend")?;
    Ok(Some(posture_chart(
        "posture-trend",
        "Blocked and warned entities, daily",
        (from, to),
        &report.series,
        "timeseries",
    )))
}

async fn show(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    outcome: Option<Result<String, Refusal>>,
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(console, visitor, q, ("Dashboards", "/console/dashboards")).await?;
    if frame.org.is_empty() {
        return Ok(page::empty(frame));
    }
    let listed = frame
        .read(
            visitor,
            ("listDashboards", "dashboards"),
            "/api/dashboards?limit=100&sortOrder=asc",
        )
        .await?;
    let listed: Vec<Listed> = if listed.is_null() {
        Vec::new()
    } else {
        decode(Value::Array(api::items(&listed)), "dashboard list")?
    };
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
            .read(visitor, ("dashboardData", "the dashboard's data"), &uri)
            .await
        {
            Ok(Value::Null) => {}
            Ok(answer) => {
                let data: Data = decode(answer, "dashboard data")?;
                let mut placed: Vec<&PanelData> = data.panels.iter().collect();
                placed.sort_by_key(|p| p.index);
                for p in placed {
                    panels.push(Drawn {
                        title: p
                            .panel
                            .title
                            .clone()
                            .unwrap_or_else(|| p.panel.report.clone()),
                        report: p.panel.report.clone(),
                        kind: p.panel.kind.clone(),
                        html: draw(p, (data.from, data.to))?,
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

/// `GET /console/dashboards`.
pub async fn page(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show(&console, &visitor, &q, None)
        .await
        .unwrap_or_else(page::refused)
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

/// `POST /console/dashboards`: `create` the overview, `delete` one.
pub async fn action(State(console): State<Console>, posted: Posted) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let outcome = async {
        match field(&form, "action") {
            "create" => {
                let made = act(
                    &visitor.api,
                    (Method::POST, "/api/dashboards"),
                    &org,
                    Some(overview()),
                )
                .await?;
                Ok(format!("dashboard {} made", api::text(&made, "title")))
            }
            "delete" => {
                let id = segment(field(&form, "id"))?;
                act(
                    &visitor.api,
                    (Method::DELETE, &format!("/api/dashboards/{id}")),
                    &org,
                    None,
                )
                .await?;
                Ok(format!("dashboard {id} deleted"))
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    show(&console, &visitor, &page::again(org), Some(outcome))
        .await
        .unwrap_or_else(page::refused)
}
