//! Load, as ratios to the same server's bare `GET /health` measured first in the same
//! run, against the server on loopback over a real database: `GET /api/organization`
//! with a user's token (an authenticated read of one organization: the gate and the
//! account's apiCalls count), and live validations (a service token, the check of 100
//! active rules of which 30 fail with their severities so that every check blocks and
//! notifies, the check log's row, the entity's snapshot and the notification), with
//! the same check as a dry run beside them (what recording costs); then live
//! validations of pipelines with the workloads of `benches/data`: the 100 rules
//! against the pipeline they all pass, and the 100 mixed rules (30 failing over all
//! 18 operators) as warnings against the failing pipeline.
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/load \
//!   cargo run --release -p adapters --example load_validate -- 4000 32
//! ```
//!
//! Arguments: how many requests of each kind (4000), how many in flight (32). The
//! database is migrated; use a scratch one. `ROWS=read,dry,blocked,pass,passdry,warn,warndry`
//! (any of them) measures only those rows, for example under a profiler.

mod support;

use serde_json::json;
use support::load::{paired, send, serve};
use support::wrk::{Piece, Request};

#[tokio::main]
async fn main() -> Result<(), String> {
    let (total, in_flight) = support::load::args();
    let server = serve(&[]).await?;
    let base = server.base.clone();
    let user = server.user_token("load")?;
    let service = server.service_token("load")?;
    let http = reqwest::Client::new();
    let name = format!("load-{}", &adapters::new_id()[..8]);
    let org = server
        .organization(&user, json!({ "name": name }), None)
        .await?;
    // 100 rules over the plugin's attributes: 30 fail (10 of them with a blocking
    // severity), 70 pass.
    for i in 0..100 {
        let (severity, value) = match i % 10 {
            0 => ("error", "^never$"),
            1 | 2 => ("warning", "^never$"),
            _ => ("error", "^eslint$"),
        };
        let rule = json!({"name": format!("rule-{i}"), "target": "plugin", "severity": severity,
                          "field": "name", "operator": "regex", "value": value});
        let status = http
            .post(format!("{base}/api/compliance/rules"))
            .bearer_auth(&user)
            .header("x-org-id", &org)
            .json(&rule)
            .send()
            .await
            .map_err(|e| e.to_string())?
            .status();
        if status != 201 {
            return Err(format!("rule {i}: {status}"));
        }
    }

    let rows = std::env::var("ROWS").ok();
    let wanted = |row: &str| {
        rows.as_deref()
            .is_none_or(|r| r.split(',').any(|w| w == row))
    };
    let sizes = (total, in_flight);
    let bearer = |token: &str| format!("Bearer {token}");
    let read = Request::get("/api/organization")
        .text_header("authorization", &bearer(&user))
        .text_header("x-org-id", &org);
    let mut lines: Vec<(&str, support::load::Paired)> = Vec::new();
    if wanted("read") {
        let figures = paired(&base, sizes, || send(&base, sizes, &read)).await?;
        lines.push(("GET /api/organization, a user's token", figures));
    }
    // The plugin check, naming one of 500 entities in turn.
    let check = |path: &str| {
        Request::post(
            path,
            vec![
                Piece::Text(
                    r#"{"attributes":{"name":"eslint","version":"8.1.0"},"entityId":"plugin-"#
                        .to_owned(),
                ),
                Piece::Modulo(500),
                Piece::Text(r#""}"#.to_owned()),
            ],
            200,
        )
        .text_header("authorization", &bearer(&service))
        .text_header("x-org-id", &org)
    };
    if wanted("dry") {
        let dry = check("/api/compliance/validate/plugin/dry-run");
        let figures = paired(&base, sizes, || send(&base, sizes, &dry)).await?;
        lines.push(("the same check as a dry run (nothing recorded)", figures));
    }
    if wanted("blocked") {
        let live = check("/api/compliance/validate/plugin");
        let figures = paired(&base, sizes, || send(&base, sizes, &live)).await?;
        lines.push((
            "live validation, 100 rules, 30 failing (blocked, notified)",
            figures,
        ));
    }
    // The benchmark workloads of `benches/data` on pipelines, each in an organization
    // of its own: the 100 rules over every operator against the pipeline they all
    // pass, and the 100 mixed rules (30 failing over all 18 operators, hostile sizes)
    // as warnings against the failing pipeline; each also as a dry run, what
    // recording costs on that document.
    for (row, name, rules, document, path) in PIPELINE_ROWS {
        if wanted(row) {
            let figures =
                pipeline_workload(&server, (&user, &service), rules, (document, path), sizes)
                    .await?;
            lines.push((name, figures));
        }
    }
    for (name, figures) in lines {
        println!("{name}: {}", figures.line());
    }
    server.stop().await;
    Ok(())
}

const LIVE: &str = "/api/compliance/validate/pipeline";
const DRY_RUN: &str = "/api/compliance/validate/pipeline/dry-run";

/// The pipeline rows: `ROWS` name, printed name, the rules (and the severity they are
/// given), the document and the path.
type PipelineRow = (
    &'static str,
    &'static str,
    (&'static str, Option<&'static str>),
    &'static str,
    &'static str,
);
const PIPELINE_ROWS: [PipelineRow; 4] = [
    (
        "pass",
        "live pipeline validation, benches/data rules-100 (all pass)",
        (RULES_100, None),
        PIPELINE,
        LIVE,
    ),
    (
        "passdry",
        "the same all-pass check as a dry run",
        (RULES_100, None),
        PIPELINE,
        DRY_RUN,
    ),
    (
        "warn",
        "live pipeline validation, rules-mixed-100, 30 failing as warnings",
        (RULES_MIXED_100, Some("warning")),
        PIPELINE_FAILING,
        LIVE,
    ),
    (
        "warndry",
        "the same warning check as a dry run",
        (RULES_MIXED_100, Some("warning")),
        PIPELINE_FAILING,
        DRY_RUN,
    ),
];

/// How many entities the checks name, in turn.
const ENTITIES: usize = 500;

const RULES_100: &str = include_str!("../../benches/data/rules-100.json");
const RULES_MIXED_100: &str = include_str!("../../benches/data/rules-mixed-100.json");
const PIPELINE: &str = include_str!("../../benches/data/pipeline.json");
const PIPELINE_FAILING: &str = include_str!("../../benches/data/pipeline-failing.json");

/// An organization with `rules` (their `id`s left to the server, their severity
/// replaced when given), then `total` live validations of `document` as a pipeline
/// with a service token.
async fn pipeline_workload(
    server: &support::load::LoadServer,
    (user, service): (&str, &str),
    (rules, severity): (&str, Option<&str>),
    (document, path): (&str, &'static str),
    (total, in_flight): (usize, usize),
) -> Result<support::load::Paired, String> {
    let http = reqwest::Client::new();
    let base = server.base.clone();
    let name = format!("load-{}", &adapters::new_id()[..8]);
    let org = server
        .organization(user, json!({ "name": name }), None)
        .await?;
    let rules: Vec<serde_json::Value> =
        serde_json::from_str(rules).map_err(|e| format!("benchmark rules: {e}"))?;
    for mut rule in rules {
        if let Some(fields) = rule.as_object_mut() {
            fields.remove("id");
            if let Some(severity) = severity {
                fields.insert("severity".to_owned(), json!(severity));
            }
        }
        let sent = http
            .post(format!("{base}/api/compliance/rules"))
            .bearer_auth(user)
            .header("x-org-id", &org)
            .json(&rule)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if sent.status() != 201 {
            let why = sent.text().await.unwrap_or_default();
            return Err(format!("a benchmark rule was refused: {why}"));
        }
    }
    let attributes: serde_json::Value =
        serde_json::from_str(document).map_err(|e| format!("benchmark document: {e}"))?;
    // The body is written once, as a load tool sends a fixed body, naming one of the
    // entities in turn.
    let prefix = format!(r#"{{"attributes":{attributes},"entityId":"pipeline-"#);
    let request = Request::post(
        path,
        vec![
            Piece::Text(prefix),
            Piece::Modulo(ENTITIES),
            Piece::Text(r#""}"#.to_owned()),
        ],
        200,
    )
    .text_header("authorization", &format!("Bearer {service}"))
    .text_header("x-org-id", &org);
    paired(&base, (total, in_flight), || {
        send(&base, (total, in_flight), &request)
    })
    .await
}
