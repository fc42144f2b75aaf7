//! The report formats of `compliance eval`, each written for its consumer.

mod github;
mod json;
mod junit;
mod sarif;
mod table;
mod tap;

use compliance_core::{Rule, Severity};

use super::eval::Report;

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `{blocked, files: [{file, blocked, violations, exempted, rulesEvaluated}]}`.
    Json,
    /// Aligned columns for people; coloured only on a terminal (and never with NO_COLOR).
    Table,
    /// JUnit XML: a test suite per file, a test case per rule.
    Junit,
    /// SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.
    Sarif,
    /// GitHub Actions workflow commands (`::error file=...,line=...::message`).
    Github,
    /// TAP version 14: a test point per file and rule.
    Tap,
}

/// How the table may look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// ANSI colours.
    pub colour: bool,
}

/// The report in `format`.
pub fn render(report: &Report<'_>, format: Format, style: Style) -> String {
    match format {
        Format::Json => json::render(report),
        Format::Table => table::render(report, style),
        Format::Junit => junit::render(report),
        Format::Sarif => sarif::render(report),
        Format::Github => github::render(report),
        Format::Tap => tap::render(report),
    }
}

/// `2 files, 3 violations, 1 blocked`.
pub(crate) fn summary(report: &Report<'_>) -> String {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let files = report.files.len();
    let violations = report.violations();
    let blocked = report.files.iter().filter(|f| f.evaluation.blocked).count();
    format!(
        "{files} file{}, {violations} violation{}, {blocked} blocked",
        plural(files),
        plural(violations)
    )
}

/// What a rule checks, in one line: its predicates as written.
pub(crate) fn describe(rule: &Rule) -> String {
    let mut text = format!("{} {} {}", rule.field, rule.operator.as_str(), rule.value);
    let joiner = match rule.condition_mode {
        compliance_core::ConditionMode::All => "and",
        compliance_core::ConditionMode::Any => "or",
    };
    for condition in &rule.conditions {
        text.push_str(&format!(
            " {joiner} {} {} {}",
            condition.field,
            condition.operator.as_str(),
            condition.value
        ));
    }
    text
}

/// The severity's wire name.
pub(crate) fn severity_name(severity: Severity) -> &'static str {
    match severity {
        Severity::Warning => "warning",
        Severity::Error => "error",
        Severity::Critical => "critical",
    }
}

/// `text` on one line with no control character (a hostile name or value cannot move
/// the cursor, colour a terminal or forge a line of a line-based format): each is
/// written as `\u{..}`.
pub(crate) fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}
