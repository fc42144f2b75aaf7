//! Posture: entities by status per target, the rules failing most, and the
//! entities' results filtered by target, status and rule, exported as CSV and as
//! the API's PolicyReport for the same filter.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::api::{self, Call, Refusal};
use super::page::{self, Frame};
use super::session::Visitor;
use super::Console;

/// A target's counts.
pub struct Counts {
    target: String,
    total: i64,
    pass: i64,
    warn: i64,
    block: i64,
    error: i64,
}

/// A rule failing often.
pub struct Failing {
    rule_id: String,
    rule_name: String,
    severity: String,
    target: String,
    violations: i64,
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

fn rows_of(report: &Value) -> Vec<Row> {
    report
        .get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| {
            let resource = r
                .get("resources")
                .and_then(Value::as_array)
                .and_then(|list| list.first())
                .cloned()
                .unwrap_or(Value::Null);
            Row {
                entity: api::text(&resource, "name"),
                uid: api::text(&resource, "uid"),
                rule: api::text(r, "rule"),
                result: api::text(r, "result"),
                severity: api::text(r, "severity"),
                message: api::text(r, "message"),
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
    let (posture, report) = if frame.may("compliancePosture") && frame.may("policyReport") {
        tokio::join!(
            visitor.api.get("/api/compliance/posture?top=10", org),
            visitor.api.get(&report_uri, org)
        )
    } else {
        (Ok(Value::Null), Ok(Value::Null))
    };
    let posture = posture?;
    let counts = ["pipeline", "plugin"]
        .iter()
        .map(|t| {
            let c = posture
                .get("byTarget")
                .and_then(|b| b.get(*t))
                .cloned()
                .unwrap_or(Value::Null);
            Counts {
                target: (*t).to_owned(),
                total: api::number(&c, "total"),
                pass: api::number(&c, "pass"),
                warn: api::number(&c, "warn"),
                block: api::number(&c, "block"),
                error: api::number(&c, "error"),
            }
        })
        .collect();
    let failing = posture
        .get("topFailingRules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| Failing {
            rule_id: api::text(r, "ruleId"),
            rule_name: api::text(r, "ruleName"),
            severity: api::text(r, "severity"),
            target: api::text(r, "target"),
            violations: api::number(r, "violations"),
        })
        .collect();
    let (target, status, rule) = filter(q);
    let (rows, matched, error) = match report {
        Ok(report) => {
            let matched = report
                .pointer("/metadata/annotations/compliance~1page-total")
                .and_then(Value::as_str)
                .unwrap_or("0")
                .to_owned();
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
    let code = frame.settle(error.map(Err));
    Ok(page::render(
        &PosturePage {
            frame,
            counts,
            failing,
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

/// `GET /console/posture/export.json`: the API's PolicyReport for the filter, as
/// the API answered it.
pub async fn report(visitor: Visitor, Query(q): Query<HashMap<String, String>>) -> Response {
    let org = q.get("org").cloned().unwrap_or_default();
    let call = Call {
        uri: &report_uri(&q),
        org: Some(&org),
        ..Call::default()
    };
    visitor
        .api
        .forward(call, Some("policy-report.json"))
        .await
        .unwrap_or_else(page::refused)
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

/// `GET /console/posture/export.csv`: the same results, one row each.
pub async fn csv(visitor: Visitor, Query(q): Query<HashMap<String, String>>) -> Response {
    let org = q.get("org").cloned().unwrap_or_default();
    let report = match visitor.api.get(&report_uri(&q), Some(&org)).await {
        Ok(report) => report,
        Err(refusal) => return page::refused(refusal),
    };
    let mut out = ::csv::Writer::from_writer(Vec::new());
    let mut written = out.write_record([
        "entityId", "entity", "rule", "result", "severity", "message",
    ]);
    for row in rows_of(&report) {
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
    match (written, out.into_inner()) {
        (Ok(()), Ok(bytes)) => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/csv; charset=utf-8"),
                ),
                (
                    header::CONTENT_DISPOSITION,
                    HeaderValue::from_static("attachment; filename=\"posture.csv\""),
                ),
            ],
            bytes,
        )
            .into_response(),
        _ => page::refused(Refusal {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "INTERNAL".to_owned(),
            message: "the export could not be written".to_owned(),
        }),
    }
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
