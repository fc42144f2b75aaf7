//! `--format json`: the API's validation result per file.

use serde_json::json;

use crate::cli::eval::Report;

pub(super) fn render(report: &Report<'_>) -> String {
    let files: Vec<serde_json::Value> = report
        .files
        .iter()
        .map(|f| {
            json!({
                "file": f.source.name,
                "blocked": f.evaluation.blocked,
                "violations": f.evaluation.violations,
                "exempted": f.evaluation.exempted,
                "rulesEvaluated": f.evaluation.rules_evaluated,
            })
        })
        .collect();
    let value = json!({"blocked": report.blocked(), "files": files});
    serde_json::to_string_pretty(&value).unwrap_or_default()
}
