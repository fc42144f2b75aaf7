//! Posture: entities by status per target, the rules failing most, and the
//! entities' results filtered by target, status and rule, exported as CSV and as
//! the API's PolicyReport for the same filter.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::api::{self, Refusal};
use super::page::{self, Frame};
use super::session::Visitor;
use super::Console;
use crate::code::ErrorCode;
use crate::http::scans::CompliancePosture;
use crate::policy_report::PolicyReport;

/// A target's counts.
pub struct Counts {
    target: String,
    total: u64,
    pass: u64,
    warn: u64,
    block: u64,
    error: u64,
}

/// A rule failing often.
pub struct Failing {
    rule_id: String,
    rule_name: String,
    severity: String,
    target: String,
    violations: u64,
}

/// One result of the filtered report.
pub struct Row {
    entity: String,
    uid: String,
    rule: String,
    result: String,
    severity: String,
    message: String,
}

#[derive(Template)]
#[template(path = "console/posture.html")]
struct PosturePage {
    frame: Frame,
    counts: Vec<Counts>,
    failing: Vec<Failing>,
    target: String,
    status: String,
    rule: String,
    rows: Vec<Row>,
    matched: String,
    export: String,
    /// The trend's chart, drawn by `chart` (every text escaped there).
    trend: Option<String>,
}

/// The filter a page, an export and the API share.
fn filter(q: &HashMap<String, String>) -> (String, String, String) {
    let get = |k: &str| q.get(k).map(|v| v.trim().to_owned()).unwrap_or_default();
    let target = match get("target").as_str() {
        "" => "pipeline".to_owned(),
        other => other.to_owned(),
    };
    (target, get("status"), get("rule"))
}

/// The API's PolicyReport address for a filter.
fn report_uri(q: &HashMap<String, String>) -> String {
    let (target, status, rule) = filter(q);
    let get = |k: &str| q.get(k).cloned().unwrap_or_default();
    format!(
        "/api/compliance/posture/policy-report?{}",
        api::query(&[
            ("target", &target),
            ("status", &status),
            ("rule", &rule),
            ("limit", &get("limit")),
            ("offset", &get("offset")),
        ])
    )
}

fn rows_of(report: &PolicyReport) -> Vec<Row> {
    report
        .results
        .iter()
        .map(|r| {
            let resource = r.resources.first();
            Row {
                entity: resource.map(|e| e.name.clone()).unwrap_or_default(),
                uid: resource.map(|e| e.uid.clone()).unwrap_or_default(),
                rule: r.rule.clone(),
                result: api::wire(&r.result),
                severity: r.severity.as_ref().map(api::wire).unwrap_or_default(),
                message: r.message.clone(),
            }
        })
        .collect()
}

/// `GET /console/posture`.
pub async fn page(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    match show(&console, &visitor, &q).await {
        Ok(response) => response,
        Err(refusal) => page::refused(refusal),
    }
}

async fn show(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
) -> Result<Response, Refusal> {
    let frame = Frame::load(console, visitor, q, ("Posture", "/console/posture")).await?;
    if frame.org.is_empty() {
        return Ok(page::empty(frame));
    }
    let org = Some(frame.org.as_str());
    // The posture and the filtered report, asked for together.
    let report_uri = report_uri(q);
    // Always asked: a visitor the API refuses (not a member, no `compliance:read`)
    // gets the refusal and its status, never a page of zeros that reads as clean.
    let (posture, report) = tokio::join!(
        visitor
            .api
            .get::<CompliancePosture>("/api/compliance/posture?top=10", org),
        visitor.api.get::<PolicyReport>(&report_uri, org)
    );
    let posture = posture?;
    let counts = ["pipeline", "plugin"]
        .iter()
        .map(|t| {
            let c = posture.by_target.get(*t);
            Counts {
                target: (*t).to_owned(),
                total: c.map_or(0, |c| c.total),
                pass: c.map_or(0, |c| c.pass),
                warn: c.map_or(0, |c| c.warn),
                block: c.map_or(0, |c| c.block),
                error: c.map_or(0, |c| c.error),
            }
        })
        .collect();
    let failing = posture
        .top_failing_rules
        .into_iter()
        .map(|r| Failing {
            rule_id: r.rule_id,
            rule_name: r.rule_name,
            severity: r.severity,
            target: r.target,
            violations: r.violations,
        })
        .collect();
    let (target, status, rule) = filter(q);
    let (rows, matched, error) = match report {
        Ok(report) => {
            let matched = report
                .metadata
                .annotations
                .get(PAGE_TOTAL)
                .cloned()
                .unwrap_or_else(|| "0".to_owned());
            (rows_of(&report), matched, None)
        }
        Err(refusal) if refusal.signed_out() => return Err(refusal),
        Err(refusal) => (Vec::new(), "0".to_owned(), Some(refusal)),
    };
    let export = api::query(&[
        ("org", &frame.org),
        ("target", &target),
        ("status", &status),
        ("rule", &rule),
    ]);
    let mut frame = frame;
    let trend = super::dashboards::posture_trend(visitor, &mut frame).await?;
    let code = frame.settle(error.map(Err));
    Ok(page::render(
        &PosturePage {
            frame,
            counts,
            failing,
            trend,
            target,
            status,
            rule,
            rows,
            matched,
            export,
        },
        code,
    ))
}

/// The most entities an export reads from the API at once.
const EXPORT_PAGE: u32 = 200;

/// The report's pages for an export's filter, read in turn (the API's own answer
/// each time, so the export passes exactly its gate), from the first entity to the
/// last: an export holds every row of its filter, whatever the API's page size.
struct Pages {
    api: api::Api,
    q: HashMap<String, String>,
    org: String,
    limit: u32,
    offset: u64,
    done: bool,
}

impl Pages {
    fn new(console: &Console, visitor: Visitor, q: HashMap<String, String>) -> Pages {
        let org = q.get("org").cloned().unwrap_or_default();
        Pages {
            api: visitor.api,
            org,
            limit: EXPORT_PAGE
                .min(console.state.config.http.max_page_limit)
                .max(1),
            offset: 0,
            done: false,
            q,
        }
    }

    /// The next page's report; `None` after the last.
    async fn next(&mut self) -> Option<Result<PolicyReport, Refusal>> {
        if self.done {
            return None;
        }
        let mut q = self.q.clone();
        q.insert("limit".to_owned(), self.limit.to_string());
        q.insert("offset".to_owned(), self.offset.to_string());
        let page = self
            .api
            .get::<PolicyReport>(&report_uri(&q), Some(&self.org))
            .await;
        match &page {
            Ok(report) => {
                let total: u64 = annotation(report, PAGE_TOTAL).parse().unwrap_or(0);
                self.offset += u64::from(self.limit);
                self.done = self.offset >= total;
            }
            Err(_) => self.done = true,
        }
        Some(page)
    }
}

const PAGE_TOTAL: &str = "compliance/page-total";

fn annotation(report: &PolicyReport, name: &str) -> String {
    report
        .metadata
        .annotations
        .get(name)
        .cloned()
        .unwrap_or_default()
}

/// A streamed download: `prefix` (the first page's bytes, read before answering, so
/// that a refusal is answered as such), then each further page's bytes as
/// `bytes_of` writes them, then `suffix`; a page that fails breaks the stream off
/// (memory stays at one page, whatever the export's size).
fn download(
    (media, filename): (&'static str, &'static str),
    prefix: Vec<u8>,
    pages: Pages,
    bytes_of: fn(&PolicyReport, bool) -> Vec<u8>,
    suffix: Vec<u8>,
) -> Response {
    use futures_util::StreamExt;
    // The pages after the first (which `prefix` holds).
    let body = futures_util::stream::unfold(
        (Some(pages), Some(suffix)),
        move |(pages, suffix)| async move {
            let mut pages = pages?;
            match pages.next().await {
                Some(Ok(report)) => {
                    let bytes = bytes_of(&report, true);
                    Some((Ok::<_, std::io::Error>(bytes), (Some(pages), suffix)))
                }
                // The answer is under way: it ends cut (the client sees a broken
                // download, never a short file that looks whole).
                Some(Err(refusal)) => Some((
                    Err(std::io::Error::other(format!(
                        "the export was cut at entity {}: {}",
                        pages.offset, refusal.message
                    ))),
                    (None, None),
                )),
                None => suffix.map(|suffix| (Ok(suffix), (None, None))),
            }
        },
    );
    let body = futures_util::stream::iter([Ok(prefix)]).chain(body);
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(media)),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static(filename),
            ),
        ],
        axum::body::Body::from_stream(body),
    )
        .into_response()
}

/// `GET /console/posture/export.json`: the API's PolicyReport for the filter, with
/// the results of every entity (read a page at a time and streamed): its summary
/// and annotations as the API states them, `compliance/page-offset` 0 and
/// `compliance/page-limit` the total, since it holds all of them.
pub async fn report(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut pages = Pages::new(&console, visitor, q);
    let first = match pages.next().await {
        Some(Ok(first)) => first,
        Some(Err(refusal)) => return page::refused(refusal),
        None => return page::refused(Refusal::internal("the export read no page")),
    };
    // The frame of the first page, its results left for the stream: `results` is
    // the report's last member, so its empty list closes the frame's text.
    let mut frame = first.clone();
    let total = annotation(&first, PAGE_TOTAL);
    let annotations = &mut frame.metadata.annotations;
    annotations.insert("compliance/page-offset".to_owned(), "0".to_owned());
    annotations.insert("compliance/page-limit".to_owned(), total);
    frame.results = Vec::new();
    let text = serde_json::to_string(&frame).unwrap_or_default();
    let Some(before) = text.strip_suffix("[]}") else {
        return page::refused(Refusal {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: ErrorCode::InternalError,
            message: "the export could not be written".to_owned(),
        });
    };
    let after = "}";
    let mut prefix = format!("{before}[").into_bytes();
    prefix.extend(results_json(&first, false));
    let suffix = format!("]{after}").into_bytes();
    download(
        (
            "application/json",
            "attachment; filename=\"policy-report.json\"",
        ),
        prefix,
        pages,
        results_json,
        suffix,
    )
}

/// A page's results as the items of a JSON array (after a comma when `later`).
fn results_json(report: &PolicyReport, later: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, result) in report.results.iter().enumerate() {
        if later || i > 0 {
            out.push(b',');
        }
        // A result is strings, numbers and maps of strings: it always serializes.
        out.extend(serde_json::to_vec(result).unwrap_or_default());
    }
    out
}

/// A cell a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, a tab or a
/// carriage return first) is written after a `'`, as OWASP advises for CSV exports.
fn cell(text: &str) -> std::borrow::Cow<'_, str> {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        std::borrow::Cow::Owned(format!("'{text}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// A page's results as CSV rows (the header before the first page's).
fn csv_rows(report: &PolicyReport, later: bool) -> Vec<u8> {
    let mut out = ::csv::Writer::from_writer(Vec::new());
    let mut written = if later {
        Ok(())
    } else {
        out.write_record([
            "entityId", "entity", "rule", "result", "severity", "message",
        ])
    };
    for row in rows_of(report) {
        if written.is_err() {
            break;
        }
        written = out.write_record([
            cell(&row.uid).as_bytes(),
            cell(&row.entity).as_bytes(),
            cell(&row.rule).as_bytes(),
            cell(&row.result).as_bytes(),
            cell(&row.severity).as_bytes(),
            cell(&row.message).as_bytes(),
        ]);
    }
    // Writing into memory fails only on a record the writer cannot hold.
    out.into_inner().unwrap_or_default()
}

/// `GET /console/posture/export.csv`: the results of every entity of the filter, one
/// row each, read a page at a time and streamed.
pub async fn csv(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut pages = Pages::new(&console, visitor, q);
    let first = match pages.next().await {
        Some(Ok(first)) => first,
        Some(Err(refusal)) => return page::refused(refusal),
        None => return page::refused(Refusal::internal("the export read no page")),
    };
    download(
        (
            "text/csv; charset=utf-8",
            "attachment; filename=\"posture.csv\"",
        ),
        csv_rows(&first, false),
        pages,
        csv_rows,
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn a_cell_a_spreadsheet_would_run_is_written_as_text() {
        for formula in ["=1+1", "+1", "-2", "@SUM(A1)", "\tx", "\rx"] {
            assert_eq!(cell(formula), format!("'{formula}"));
        }
        for plain in ["web-app", "a=b", "", "1"] {
            assert_eq!(cell(plain), plain);
        }
    }
}
