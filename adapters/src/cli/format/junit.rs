//! `--format junit`: JUnit XML as CI systems read it (Jenkins, GitLab, Azure,
//! the test-report actions): `<testsuites>`, a `<testsuite>` per attribute file, a
//! `<testcase>` per rule, with only the attributes the Jenkins JUnit schema
//! (`junit-10.xsd`) declares on each element (`skipped` is counted on each
//! `<testsuite>`, never on `<testsuites>`). A blocking violation is a `<failure>`; a warning passes with
//! its message in `<system-out>`; a rule for the other target is `<skipped>`.

use std::fmt::Write;

use super::severity_name;
use crate::cli::eval::{Outcome, Report};

pub(super) fn render(report: &Report<'_>) -> String {
    let mut suites = String::new();
    let (mut tests, mut failures) = (0usize, 0usize);
    for file in &report.files {
        let mut cases = String::new();
        let (mut file_failures, mut file_skipped) = (0usize, 0usize);
        for rule in report.rules {
            let outcome = file.outcome(rule, report.target);
            let _ = write!(
                cases,
                "    <testcase classname=\"{}\" name=\"{}\"",
                escape(&file.source.name),
                escape(&rule.name)
            );
            match outcome {
                Outcome::Pass => cases.push_str("/>\n"),
                Outcome::Skip => {
                    file_skipped += 1;
                    let _ = writeln!(
                        cases,
                        ">\n      <skipped message=\"the rule is for {}s\"/>\n    </testcase>",
                        rule.target.as_str()
                    );
                }
                Outcome::Fail => {
                    let message = file
                        .violation(rule)
                        .map(|v| v.message())
                        .unwrap_or_default();
                    let text = escape(&message);
                    if rule.severity.blocks() {
                        file_failures += 1;
                        let _ = writeln!(
                            cases,
                            ">\n      <failure message=\"{text}\" type=\"{}\">{text}</failure>\n    </testcase>",
                            severity_name(rule.severity)
                        );
                    } else {
                        let _ = writeln!(
                            cases,
                            ">\n      <system-out>warning: {text}</system-out>\n    </testcase>"
                        );
                    }
                }
            }
        }
        let count = report.rules.len();
        tests += count;
        failures += file_failures;
        let _ = write!(
            suites,
            "  <testsuite name=\"{}\" tests=\"{count}\" failures=\"{file_failures}\" errors=\"0\" skipped=\"{file_skipped}\">\n{cases}  </testsuite>\n",
            escape(&file.source.name)
        );
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"compliance\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\">\n{suites}</testsuites>"
    )
}

/// Text for an XML 1.0 attribute or element: the five markup characters escaped, and
/// the characters XML 1.0 cannot hold at all (most controls) replaced by U+FFFD.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}
