//! `--format github`: workflow commands that GitHub Actions turns into annotations
//! on the files (`::error file=F,line=L,title=T::message`; a warning for a rule of
//! severity warning), then a summary line.

use compliance_core::Severity;

use crate::cli::eval::Report;
use crate::cli::locate::line_of;

pub(super) fn render(report: &Report<'_>) -> String {
    let mut out = String::new();
    for file in &report.files {
        for v in &file.evaluation.violations {
            let command = match v.severity() {
                Severity::Warning => "warning",
                Severity::Error | Severity::Critical => "error",
            };
            let mut properties = format!("file={}", property(&file.source.name));
            if let Some(line) = line_of(&file.source.text, v.field()) {
                properties.push_str(&format!(",line={line}"));
            }
            properties.push_str(&format!(",title={}", property(v.rule_name())));
            out.push_str(&format!(
                "::{command} {properties}::{}\n",
                data(&v.message())
            ));
        }
    }
    out.push_str(&format!("compliance: {}", super::summary(report)));
    out
}

/// A command's message: `%`, CR and LF escaped, as the runner decodes them.
fn data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A command's property value: also `:` and `,`, which end a property.
fn property(text: &str) -> String {
    data(text).replace(':', "%3A").replace(',', "%2C")
}
