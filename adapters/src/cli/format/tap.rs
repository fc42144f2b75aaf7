//! `--format tap`: TAP version 13, a test point per file and rule: what the `prove`
//! of Debian stable (TAP::Harness 3.44, which refuses a `TAP version 14` header)
//! and TAP 14 consumers (which read version 13 documents, as TAP 14 requires) both
//! read. Nothing of TAP 14 alone is used: no subtests, no pragmas. A blocking
//! violation is `not ok` with a YAML block (severity, field, message, line); a
//! warning is `not ok ... # TODO warning`, which TAP consumers do not count as a
//! failure; a rule for the other target is `ok ... # SKIP`.

use std::fmt::Write;

use super::{one_line, severity_name};
use crate::cli::eval::{Outcome, Report};
use crate::cli::locate::line_of;

pub(super) fn render(report: &Report<'_>) -> String {
    let mut out = String::from("TAP version 13\n");
    let _ = writeln!(out, "1..{}", report.files.len() * report.rules.len());
    let mut n = 0usize;
    for file in &report.files {
        for rule in report.rules {
            n += 1;
            let description = escape(&format!("{} {}", file.source.name, rule.name));
            match file.outcome(rule, report.target) {
                Outcome::Pass => {
                    let _ = writeln!(out, "ok {n} - {description}");
                }
                Outcome::Skip => {
                    let _ = writeln!(
                        out,
                        "ok {n} - {description} # SKIP the rule is for {}s",
                        rule.target.as_str()
                    );
                }
                Outcome::Fail => {
                    let todo = if rule.severity.blocks() {
                        ""
                    } else {
                        " # TODO warning"
                    };
                    let _ = writeln!(out, "not ok {n} - {description}{todo}");
                    out.push_str("  ---\n");
                    let _ = writeln!(out, "  severity: {}", severity_name(rule.severity));
                    if let Some(v) = file.violation(rule) {
                        let _ = writeln!(out, "  field: {}", quoted(v.field()));
                        let _ = writeln!(out, "  message: {}", quoted(&v.message()));
                        if let Some(line) = line_of(&file.source.text, v.field()) {
                            let _ = writeln!(out, "  line: {line}");
                        }
                    }
                    out.push_str("  ...\n");
                }
            }
        }
    }
    out.pop();
    out
}

/// A description: one line, `#` and `\` escaped (a `#` would start a directive).
fn escape(text: &str) -> String {
    one_line(text).replace('\\', "\\\\").replace('#', "\\#")
}

/// A YAML scalar that cannot break the block: a JSON string (JSON is YAML).
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}
