//! `--format sarif`: SARIF 2.1.0 as GitHub code scanning accepts it.
//!
//! - `tool.driver.rules`: every rule, `id` its key (the rule's id, or its name when it
//!   has none), `name`, a short description (the name), a full description and help
//!   (what it checks), the default level from its severity, and its tags.
//! - `results`: a result per violation, `ruleId` and `ruleIndex` pointing at the rule,
//!   the level from the severity (`critical` and `error` are `error`), the message,
//!   a location at the attributes file (a relative URI as given) with the line of
//!   the field where it can be found, and `partialFingerprints` that depend on the
//!   rule, the file and the field only, so an alert survives edits elsewhere.

use std::path::{Component, Path, PathBuf};

use compliance_core::{Rule, Severity, Violation};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::describe;
use crate::cli::eval::Report;
use crate::cli::locate::line_of;

/// The schema's address, as GitHub's documentation writes it.
const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

pub(super) fn render(report: &Report<'_>) -> String {
    let rules: Vec<Value> = report.rules.iter().map(rule).collect();
    let mut results = Vec::new();
    for file in &report.files {
        let uri = uri(&file.source.name);
        for v in &file.evaluation.violations {
            let index = report.rules.iter().position(|r| r.key() == v.rule_id());
            results.push(result(
                v,
                index,
                &uri,
                line_of(&file.source.text, v.field()),
            ));
        }
    }
    let sarif = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "compliance",
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "results": results,
        }],
    });
    serde_json::to_string_pretty(&sarif).unwrap_or_default()
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Warning => "warning",
        Severity::Error | Severity::Critical => "error",
    }
}

fn rule(rule: &Rule) -> Value {
    let checks = describe(rule);
    json!({
        "id": rule.key(),
        "name": rule.name,
        "shortDescription": {"text": rule.name},
        "fullDescription": {"text": format!("{} rule: {checks}", rule.target.as_str())},
        "help": {"text": format!("The {} attributes must satisfy: {checks}", rule.target.as_str())},
        "defaultConfiguration": {"level": level(rule.severity)},
        "properties": {"tags": rule.tags, "severity": super::severity_name(rule.severity)},
    })
}

fn result(v: &Violation, index: Option<usize>, uri: &str, line: Option<usize>) -> Value {
    let mut physical = json!({"artifactLocation": {"uri": uri}});
    if let (Some(line), Some(object)) = (line, physical.as_object_mut()) {
        object.insert("region".into(), json!({"startLine": line}));
    }
    let mut result = json!({
        "ruleId": v.rule_id(),
        "level": level(v.severity()),
        "message": {"text": v.message()},
        "locations": [{"physicalLocation": physical}],
        "partialFingerprints": {"complianceRuleField/v1": fingerprint(v.rule_id(), uri, v.field())},
    });
    if let (Some(index), Some(object)) = (index, result.as_object_mut()) {
        object.insert("ruleIndex".into(), index.into());
    }
    result
}

/// The file as code scanning wants it: relative to the working directory (where CI
/// checks the repository out), `.` and `..` resolved, forward slashes, each byte a URI
/// does not allow percent-encoded; a file outside the working directory is a
/// `file://` URI.
fn uri(name: &str) -> String {
    let given = Path::new(name);
    let cwd = std::env::current_dir().unwrap_or_default();
    let absolute = if given.is_absolute() {
        normalize(given)
    } else {
        normalize(&cwd.join(given))
    };
    let (relative, prefix) = match absolute.strip_prefix(normalize(&cwd)) {
        Ok(inside) => (inside.to_path_buf(), ""),
        Err(_) => (absolute, "file://"),
    };
    let path: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|c| c != "/")
        .collect();
    let mut out = String::from(prefix);
    if !prefix.is_empty() {
        out.push('/');
    }
    for (i, segment) in path.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        for byte in segment.bytes() {
            match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    out.push(char::from(byte))
                }
                other => out.push_str(&format!("%{other:02X}")),
            }
        }
    }
    out
}

/// `.` and `..` resolved without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Stable across runs and edits elsewhere in the file: rule, file and field only.
fn fingerprint(rule: &str, uri: &str, field: &str) -> String {
    let mut hash = Sha256::new();
    for part in [rule, uri, field] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    hex::encode(hash.finalize())
}
