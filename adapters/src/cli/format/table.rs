//! `--format table`: for people at a terminal.

use compliance_core::Severity;

use super::{one_line, severity_name, summary, Style};
use crate::cli::eval::Report;
use crate::cli::locate::line_of;

const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const GREEN: &str = "\x1b[32m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

pub(super) fn render(report: &Report<'_>, style: Style) -> String {
    let paint = |code: &str, text: &str| {
        if style.colour {
            format!("{code}{text}{RESET}")
        } else {
            text.to_owned()
        }
    };
    let mut rows: Vec<[String; 4]> = Vec::new();
    let mut severities: Vec<Severity> = Vec::new();
    for file in &report.files {
        for v in &file.evaluation.violations {
            let place = match line_of(&file.source.text, v.field()) {
                Some(line) => format!("{}:{line}", file.source.name),
                None => file.source.name.clone(),
            };
            rows.push([
                one_line(&place).into_owned(),
                one_line(v.rule_name()).into_owned(),
                severity_name(v.severity()).to_owned(),
                one_line(&v.message()).into_owned(),
            ]);
            severities.push(v.severity());
        }
    }
    let mut out = String::new();
    if !rows.is_empty() {
        let headers = ["FILE", "RULE", "SEVERITY", "MESSAGE"];
        let width = |column: usize| {
            rows.iter()
                .filter_map(|r| r.get(column))
                .map(|c| c.chars().count())
                .chain(headers.get(column).map(|h| h.len()))
                .max()
                .unwrap_or(0)
        };
        let widths = [width(0), width(1), width(2)];
        let [w0, w1, w2] = widths;
        let header = format!(
            "{:w0$}  {:w1$}  {:w2$}  MESSAGE",
            "FILE", "RULE", "SEVERITY"
        );
        out.push_str(&paint(BOLD, &header));
        out.push('\n');
        for (row, severity) in rows.iter().zip(&severities) {
            let [place, rule, level, message] = row;
            let colour = if severity.blocks() { RED } else { YELLOW };
            // Pad before painting, so that the escape codes do not count as width.
            let level = paint(colour, &format!("{level:w2$}"));
            out.push_str(&format!("{place:w0$}  {rule:w1$}  {level}  {message}\n"));
        }
        out.push('\n');
    }
    let summary = summary(report);
    let blocked = report.blocked();
    out.push_str(&if blocked {
        paint(RED, &summary)
    } else {
        paint(GREEN, &summary)
    });
    out
}
