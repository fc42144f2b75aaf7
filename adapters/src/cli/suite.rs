//! `compliance test PATH`: expected results per rule and attribute file, checked
//! the way `kyverno test` and `opa test` check theirs.
//!
//! A test file (`compliance-test.yaml`, `.yml` or `.json`; a directory is searched
//! for them recursively) names its rule files, its target, its attribute files (paths
//! relative to the test file; globs allowed) and what each rule should give for each
//! file:
//!
//! ```yaml
//! name: plugins are pinned
//! rules: [rules.yaml]
//! target: plugin
//! attributes: [good.json, bad.yaml]
//! results:
//!   - rule: versions-are-pinned   # the rule's id, or its name
//!     files: [bad.yaml]
//!     result: fail                # pass, fail or skip
//! ```
//!
//! Only the listed pairs are checked. `--write` replaces `results` with what the
//! rules give today, every pair, grouped by rule and result (the file is rewritten:
//! its comments are not kept).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use compliance_core::Target;
use serde::{Deserialize, Serialize};

use super::eval::{check, Limits, Outcome, Report, Rules};
use super::format::one_line;
use super::source::{expand, syntax_of, Source, Syntax, STDIN};
use super::{bad_input, Failure};

/// The names a test file may have.
pub const TEST_FILE_NAMES: [&str; 3] = [
    "compliance-test.yaml",
    "compliance-test.yml",
    "compliance-test.json",
];

/// A test file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestFile {
    /// What the test is about, for the output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Rule files, relative to the test file.
    pub rules: Vec<String>,
    /// `plugin` or `pipeline`.
    pub target: Target,
    /// Attribute files or globs, relative to the test file.
    pub attributes: Vec<String>,
    /// The expected results.
    #[serde(default)]
    pub results: Vec<Expected>,
}

/// What one rule should give for some files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expected {
    /// The rule's id, or its name.
    pub rule: String,
    /// Attribute files as the test file names them.
    pub files: Vec<String>,
    /// `pass`, `fail` or `skip`.
    pub result: Outcome,
}

/// `compliance test`'s flags.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Print only what differs.
    pub fail_only: bool,
    /// Record today's results as the expected ones.
    pub write: bool,
}

/// What a run found: the text to print, and whether everything held.
#[derive(Debug)]
pub struct Outcomes {
    /// The output.
    pub text: String,
    /// No expectation differed.
    pub ok: bool,
}

/// Runs every test file under `path`.
pub fn run(path: &Path, limits: &Limits, options: Options) -> Result<Outcomes, Failure> {
    let files = test_files(path)?;
    let mut text = String::new();
    let (mut checks, mut differ) = (0usize, 0usize);
    for file in &files {
        let (file_checks, file_differ) = run_one(file, limits, options, &mut text)?;
        checks += file_checks;
        differ += file_differ;
    }
    let _ = write!(
        text,
        "{} test file{}, {checks} check{}, {differ} differ{}",
        files.len(),
        plural(files.len()),
        plural(checks),
        if differ == 1 { "s" } else { "" }
    );
    Ok(Outcomes {
        text,
        ok: differ == 0,
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The test files: `path` itself, or those under a directory, sorted.
fn test_files(path: &Path) -> Result<Vec<PathBuf>, Failure> {
    if path.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    if !path.is_dir() {
        return Err(bad_input(format!(
            "{}: no such file or directory",
            path.display()
        )));
    }
    let mut found = Vec::new();
    let mut pending = vec![path.to_owned()];
    while let Some(dir) = pending.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| bad_input(format!("{}: {e}", dir.display())))?;
        for entry in entries {
            let entry = entry.map_err(|e| bad_input(format!("{}: {e}", dir.display())))?;
            let kind = entry
                .file_type()
                .map_err(|e| bad_input(format!("{}: {e}", entry.path().display())))?;
            let name = entry.file_name();
            if kind.is_dir() {
                pending.push(entry.path());
            } else if TEST_FILE_NAMES.iter().any(|n| name.to_str() == Some(n)) {
                found.push(entry.path());
            }
        }
    }
    if found.is_empty() {
        return Err(bad_input(format!(
            "{}: no test file ({}) found",
            path.display(),
            TEST_FILE_NAMES.join(", ")
        )));
    }
    found.sort();
    Ok(found)
}

/// Checks one test file; writes its lines to `out`; answers (checks, differing).
fn run_one(
    path: &Path,
    limits: &Limits,
    options: Options,
    out: &mut String,
) -> Result<(usize, usize), Failure> {
    let shown = path.display().to_string();
    let in_test = |f: Failure| bad_input(format!("{shown}: {}", f.message));
    let test: TestFile = Source::read(&shown, &mut false)?.parse()?;
    if test
        .rules
        .iter()
        .chain(&test.attributes)
        .any(|f| f == STDIN)
    {
        return Err(bad_input(format!(
            "{shown}: a test names files; `-` (standard input) is not one"
        )));
    }
    let mut stdin_taken = false;
    let base = path.parent().unwrap_or(Path::new(""));
    let relative = |name: &str| base.join(name).display().to_string();
    let rule_files: Vec<String> = test.rules.iter().map(|r| relative(r)).collect();
    let rules = Rules::load(&rule_files, limits, &mut stdin_taken).map_err(in_test)?;
    let patterns: Vec<String> = test.attributes.iter().map(|a| relative(a)).collect();
    let attribute_files = expand(&patterns).map_err(in_test)?;
    let report = check(
        &rules,
        test.target,
        &attribute_files,
        limits,
        &mut stdin_taken,
    )
    .map_err(in_test)?;
    // Reports name files by their path from here; the test names them from its folder.
    let as_written = |file: &str| -> String {
        Path::new(file)
            .strip_prefix(base)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| file.to_owned())
    };
    let title = test.name.clone().unwrap_or_else(|| shown.clone());

    if options.write {
        let count = record(path, test, &report, as_written)?;
        let _ = writeln!(out, "{}: recorded {count} results", one_line(&title));
        return Ok((0, 0));
    }

    let mut lines = String::new();
    let (mut checks, mut differ) = (0usize, 0usize);
    for expected in &test.results {
        let rule = rules.find(&expected.rule).ok_or_else(|| {
            bad_input(format!(
                "{shown}: no rule `{}` in {}",
                expected.rule,
                test.rules.join(", ")
            ))
        })?;
        for name in &expected.files {
            let file = report
                .files
                .iter()
                .find(|f| as_written(&f.source.name) == *name)
                .ok_or_else(|| {
                    bad_input(format!(
                        "{shown}: `{name}` is not one of its attribute files"
                    ))
                })?;
            let got = file.outcome(rule, report.target);
            checks += 1;
            let label = format!("{} · {}", one_line(name), one_line(&rule.name));
            if got == expected.result {
                if !options.fail_only {
                    let _ = writeln!(lines, "  ok    {label}: {}", got.as_str());
                }
                continue;
            }
            differ += 1;
            let why = file
                .violation(rule)
                .map(|v| format!(" ({})", one_line(&v.message())))
                .unwrap_or_default();
            let _ = writeln!(
                lines,
                "  FAIL  {label}: expected {}, got {}{why}",
                expected.result.as_str(),
                got.as_str()
            );
        }
    }
    if !options.fail_only || differ > 0 {
        let verdict = if differ == 0 { "PASS" } else { "FAIL" };
        let _ = writeln!(out, "{verdict} {} ({checks} checks)", one_line(&title));
        out.push_str(&lines);
    }
    Ok((checks, differ))
}

/// `--write`: replaces the test's results with today's outcome of every rule for every
/// file, grouped by rule and outcome; answers how many pairs it recorded.
fn record(
    path: &Path,
    test: TestFile,
    report: &Report<'_>,
    as_written: impl Fn(&str) -> String,
) -> Result<usize, Failure> {
    let shown = path.display();
    let mut results: Vec<Expected> = Vec::new();
    for rule in report.rules {
        for outcome in [Outcome::Pass, Outcome::Fail, Outcome::Skip] {
            let files: Vec<String> = report
                .files
                .iter()
                .filter(|f| f.outcome(rule, report.target) == outcome)
                .map(|f| as_written(&f.source.name))
                .collect();
            if !files.is_empty() {
                results.push(Expected {
                    rule: rule.key().to_owned(),
                    files,
                    result: outcome,
                });
            }
        }
    }
    let count = results.iter().map(|e| e.files.len()).sum();
    let written = TestFile { results, ..test };
    let text = match syntax_of(path) {
        Syntax::Json => serde_json::to_string_pretty(&written).map_err(|e| e.to_string()),
        Syntax::Yaml => serde_yaml_ng::to_string(&written).map_err(|e| e.to_string()),
    }
    .map_err(|e| bad_input(format!("{shown}: {e}")))?;
    std::fs::write(path, text).map_err(|e| bad_input(format!("{shown}: {e}")))?;
    Ok(count)
}
