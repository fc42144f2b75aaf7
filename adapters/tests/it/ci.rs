//! `compliance eval` and `compliance test` as CI runs them: each report format checked
//! by its consumer's rules (the SARIF 2.1.0 schema, an XML parse of the JUnit, the
//! workflow-command and TAP grammars), the ready example, YAML beside JSON, many files
//! and standard input.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::cli::{compliance, write};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/ci")
}

fn example_file(name: &str) -> String {
    example().join(name).display().to_string()
}

/// `compliance` with `input` on standard input.
fn compliance_with_stdin(args: &[&str], input: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_compliance"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh copy of the example directory, to change.
fn example_copy() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ci-example-{}", uuid::Uuid::new_v4()));
    copy_dir(&example(), &dir);
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The example's plugin run in `format`: (exit code, stdout).
fn plugins_in(format: &str) -> (i32, String) {
    let rules = example_file("rules.yaml");
    let eslint = example_file("plugins/eslint.json");
    let fetcher = example_file("plugins/fetcher.yaml");
    let (code, out, err) = compliance(&[
        "eval", "--rules", &rules, "--target", "plugin", "--format", format, &eslint, &fetcher,
    ]);
    assert!(err.is_empty(), "{format}: {err}");
    (code, out)
}

/// The SARIF 2.1.0 schema as serde-sarif ships it. serde-sarif is a dev-dependency,
/// so cargo has unpacked it under `$CARGO_HOME/registry/src/<index>/` for this build;
/// its version comes from `Cargo.lock`.
fn sarif_schema() -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    let version = lock
        .split("[[package]]")
        .find(|p| p.contains("name = \"serde-sarif\""))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = ")))
        .map(|v| v.trim_matches('"').to_owned())
        .expect("serde-sarif in Cargo.lock");
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(&std::env::var_os("HOME").unwrap()).join(".cargo"));
    let schema = std::fs::read_dir(cargo_home.join("registry/src"))
        .unwrap()
        .map(|index| {
            index
                .unwrap()
                .path()
                .join(format!("serde-sarif-{version}/src/schema.json"))
        })
        .find(|path| path.is_file())
        .expect("serde-sarif unpacked by cargo");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(schema).unwrap()).unwrap();
    assert!(schema["$id"]
        .as_str()
        .unwrap()
        .ends_with("sarif-schema-2.1.0.json"));
    schema
}

#[test]
fn the_ready_example_holds() {
    let (code, out, err) = compliance(&["test", &example().display().to_string()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("PASS plugins (7 checks)"), "{out}");
    assert!(out.contains("PASS pipelines (2 checks)"), "{out}");
    assert!(out.ends_with("2 test files, 9 checks, 0 differ\n"), "{out}");
}

#[test]
fn a_test_that_differs_says_what_and_exits_1_then_write_records_today() {
    let dir = example_copy();
    let test = dir.join("compliance-test.yaml");
    let text = std::fs::read_to_string(&test).unwrap();
    // Claim the failing plugin passes semver.
    let changed = text.replacen(
        "files: [plugins/fetcher.yaml]\n    result: fail",
        "files: [plugins/fetcher.yaml]\n    result: pass",
        1,
    );
    assert_ne!(changed, text);
    std::fs::write(&test, changed).unwrap();
    let path = dir.display().to_string();

    let (code, out, _) = compliance(&["test", &path]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL plugins (7 checks)"), "{out}");
    assert!(
        out.contains("  FAIL  plugins/fetcher.yaml · Plugin versions are semantic versions: expected pass, got fail (Plugin versions are semantic versions: `version` must match"),
        "{out}"
    );
    assert!(out.contains("  ok    plugins/eslint.json"), "{out}");
    assert!(out.ends_with("9 checks, 1 differs\n"), "{out}");

    // --fail-only: the differing check and the summary, nothing that holds.
    let (code, out, _) = compliance(&["test", "--fail-only", &path]);
    assert_eq!(code, 1);
    assert!(!out.contains("  ok "), "{out}");
    assert!(!out.contains("PASS pipelines"), "{out}");
    assert_eq!(out.matches("  FAIL  ").count(), 1, "{out}");

    // --write records today's results; then everything holds, and every pair is checked.
    let (code, out, err) = compliance(&["test", "--write", &test.display().to_string()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("plugins: recorded 8 results"), "{out}");
    let written: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&test).unwrap()).unwrap();
    assert_eq!(written["name"], "plugins");
    assert_eq!(written["target"], "plugin");
    assert_eq!(written["attributes"], serde_json::json!(["plugins/*"]));
    let results = written["results"].as_array().unwrap();
    assert!(results.contains(&serde_json::json!(
        {"rule": "semver", "files": ["plugins/fetcher.yaml"], "result": "fail"}
    )));
    assert!(results.contains(&serde_json::json!(
        {"rule": "pinned-steps", "files": ["plugins/eslint.json", "plugins/fetcher.yaml"], "result": "skip"}
    )));
    let (code, out, _) = compliance(&["test", &path]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("PASS plugins (8 checks)"), "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn test_refuses_bad_input_with_exit_2() {
    let dir = example_copy();
    let test = dir.join("compliance-test.yaml");
    let text = std::fs::read_to_string(&test).unwrap();
    let cases = [
        (
            "an unknown rule",
            text.replace("rule: semver", "rule: no-such-rule"),
        ),
        (
            "an unknown file",
            text.replace("[plugins/eslint.json]", "[plugins/other.json]"),
        ),
        ("an unknown field", format!("{text}\nextra: 1\n")),
        (
            "a bad result",
            text.replace("result: skip", "result: maybe"),
        ),
        (
            "a missing rule file",
            text.replace("[rules.yaml]", "[nope.yaml]"),
        ),
        (
            "a glob of nothing",
            text.replace("[plugins/*]", "[plugins/*.toml]"),
        ),
        ("standard input", text.replace("[plugins/*]", "[-]")),
    ];
    for (what, body) in cases {
        std::fs::write(&test, body).unwrap();
        let (code, out, err) = compliance(&["test", &test.display().to_string()]);
        assert_eq!(code, 2, "{what}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
        assert!(err.contains("compliance-test.yaml"), "{what}: {err}");
    }
    let (code, _, err) = compliance(&["test", &dir.join("nowhere").display().to_string()]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    let empty = std::env::temp_dir().join(format!("empty-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&empty).unwrap();
    let (code, _, err) = compliance(&["test", &empty.display().to_string()]);
    assert_eq!(code, 2);
    assert!(err.contains("no test file"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn sarif_meets_the_schema_and_what_code_scanning_needs() {
    let (code, out) = plugins_in("sarif");
    assert_eq!(code, 1);
    let sarif: Value = serde_json::from_str(&out).unwrap();
    let schema = sarif_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // The typed model of the same schema reads it too.
    let typed: serde_sarif::sarif::Sarif = serde_json::from_value(sarif.clone()).unwrap();
    assert_eq!(typed.runs.len(), 1);

    let run = &sarif["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        ["semver", "no-pipe-install", "described", "pinned-steps"]
    );
    assert_eq!(rules[0]["defaultConfiguration"]["level"], "error");
    assert_eq!(rules[1]["defaultConfiguration"]["level"], "error"); // critical
    assert_eq!(rules[2]["defaultConfiguration"]["level"], "warning");
    assert_eq!(rules[0]["name"], "Plugin versions are semantic versions");
    assert!(rules[0]["help"]["text"]
        .as_str()
        .unwrap()
        .contains("version regex"));
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "the failing plugin's three violations");
    for result in results {
        let index = result["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[index]["id"], result["ruleId"]);
        let location = &result["locations"][0]["physicalLocation"];
        let uri = location["artifactLocation"]["uri"].as_str().unwrap();
        // Outside the working directory: an absolute file URI, `..` resolved.
        assert!(uri.starts_with("file:///"), "{uri}");
        assert!(uri.ends_with("/examples/ci/plugins/fetcher.yaml"), "{uri}");
        assert!(!uri.contains("./"), "{uri}");
        assert!(result["partialFingerprints"]["complianceRuleField/v1"].is_string());
    }
    let semver = results.iter().find(|r| r["ruleId"] == "semver").unwrap();
    assert_eq!(semver["level"], "error");
    assert_eq!(
        semver["locations"][0]["physicalLocation"]["region"]["startLine"],
        2
    );
    let described = results.iter().find(|r| r["ruleId"] == "described").unwrap();
    assert_eq!(described["level"], "warning");

    // Run from the checkout's root, as CI does: the URI is the repository path.
    let out = Command::new(env!("CARGO_BIN_EXE_compliance"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args([
            "eval",
            "--rules",
            "examples/ci/rules.yaml",
            "--target",
            "plugin",
        ])
        .args(["--format", "sarif", "./examples/ci/plugins/fetcher.yaml"])
        .output()
        .unwrap();
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
            ["uri"],
        "examples/ci/plugins/fetcher.yaml"
    );
    assert!(validator.is_valid(&sarif));
}

#[test]
fn sarif_ids_and_fingerprints_do_not_churn() {
    let dir = example_copy();
    let rules = dir.join("rules.yaml").display().to_string();
    let plugin = dir.join("plugins/fetcher.yaml");
    let run = || {
        let (code, out, err) = compliance(&[
            "eval",
            "--rules",
            &rules,
            "--target",
            "plugin",
            "--format",
            "sarif",
            &plugin.display().to_string(),
        ]);
        assert_eq!(code, 1, "{err}");
        let sarif: Value = serde_json::from_str(&out).unwrap();
        sarif["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["ruleId"].as_str().unwrap().to_owned(),
                    r["partialFingerprints"].clone(),
                    r["locations"][0]["physicalLocation"]["region"]["startLine"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    let first = run();
    assert_eq!(first, run(), "two runs, the same results");
    // An edit elsewhere in the file moves the lines, not the alerts.
    let text = std::fs::read_to_string(&plugin).unwrap();
    std::fs::write(&plugin, format!("# a comment\nowner: me\n{text}")).unwrap();
    let moved = run();
    for ((rule, print, line), (rule2, print2, line2)) in first.iter().zip(&moved) {
        assert_eq!((rule, print), (rule2, print2));
        assert_eq!(line.as_u64().unwrap() + 2, line2.as_u64().unwrap());
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn junit_parses_with_a_case_per_file_and_rule() {
    let (code, out) = plugins_in("junit");
    assert_eq!(code, 1);
    let document = roxmltree::Document::parse(&out).unwrap();
    let root = document.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(root.attribute("tests"), Some("8"));
    assert_eq!(root.attribute("failures"), Some("2"), "the blocking two");
    jenkins_junit_schema(root);
    let suites: Vec<_> = root
        .children()
        .filter(|n| n.has_tag_name("testsuite"))
        .collect();
    assert_eq!(suites.len(), 2);
    let skipped: usize = suites
        .iter()
        .map(|s| s.attribute("skipped").unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(skipped, 2, "the pipeline rule, twice");
    for suite in &suites {
        let cases: Vec<_> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(cases.len(), 4);
        assert_eq!(suite.attribute("tests"), Some("4"));
        let failures = cases
            .iter()
            .filter(|c| c.children().any(|n| n.has_tag_name("failure")))
            .count();
        assert_eq!(
            suite.attribute("failures"),
            Some(failures.to_string().as_str())
        );
    }
    let fetcher = suites
        .iter()
        .find(|s| s.attribute("name").unwrap().ends_with("fetcher.yaml"))
        .unwrap();
    let semver = fetcher
        .children()
        .find(|c| c.attribute("name") == Some("Plugin versions are semantic versions"))
        .unwrap();
    let failure = semver
        .children()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert_eq!(failure.attribute("type"), Some("error"));
    assert!(failure
        .attribute("message")
        .unwrap()
        .contains("found \"latest\""));
    let described = fetcher
        .children()
        .find(|c| c.attribute("name") == Some("Plugins describe themselves"))
        .unwrap();
    assert!(described.children().any(|n| n.has_tag_name("system-out")));
}

/// The Jenkins JUnit schema (`junit-10.xsd` of the xunit plugin, which Jenkins'
/// JUnit reader follows), element by element: the attributes each element may carry
/// (and must), and the children it may hold. A document that passes this is what
/// the schema accepts for the elements this report writes.
fn jenkins_junit_schema(node: roxmltree::Node<'_, '_>) {
    let name = node.tag_name().name();
    let (allowed, required, children): (&[&str], &[&str], &[&str]) = match name {
        "testsuites" => (
            &["name", "time", "tests", "failures", "errors"],
            &[],
            &["testsuite"],
        ),
        "testsuite" => (
            &[
                "name",
                "tests",
                "failures",
                "errors",
                "group",
                "time",
                "skipped",
                "timestamp",
                "hostname",
                "id",
                "package",
                "file",
                "log",
                "url",
            ],
            &["name", "tests", "failures", "errors"],
            &[
                "testsuite",
                "properties",
                "testcase",
                "system-out",
                "system-err",
            ],
        ),
        "testcase" => (
            &["name", "time", "classname", "group"],
            &["name"],
            &[
                "skipped",
                "error",
                "failure",
                "rerunFailure",
                "rerunError",
                "flakyFailure",
                "flakyError",
                "system-out",
                "system-err",
            ],
        ),
        "failure" | "error" | "skipped" => (&["type", "message"], &[], &[]),
        "system-out" | "system-err" => (&[], &[], &[]),
        other => panic!("<{other}> is not an element of the Jenkins JUnit schema"),
    };
    for attribute in node.attributes() {
        assert!(
            allowed.contains(&attribute.name()),
            "<{name}> may not carry `{}`",
            attribute.name()
        );
    }
    for attribute in required {
        assert!(
            node.attribute(*attribute).is_some(),
            "<{name}> needs `{attribute}`"
        );
    }
    for child in node.children().filter(roxmltree::Node::is_element) {
        assert!(
            children.contains(&child.tag_name().name()),
            "<{name}> may not hold <{}>",
            child.tag_name().name()
        );
        jenkins_junit_schema(child);
    }
}

/// Runs TAP through Debian's `prove` (TAP::Harness), as a consumer would: its
/// summary, and whether it reported a parse error.
fn through_prove(tap: &str) -> String {
    let file = std::env::temp_dir().join(format!("compliance-{}.tap", uuid::Uuid::new_v4()));
    std::fs::write(&file, tap).unwrap();
    let output = std::process::Command::new("prove")
        .args(["--verbose", "--exec", "cat"])
        .arg(&file)
        .output()
        .expect("`prove` (Debian's perl) must be installed: scripts/test installs it");
    std::fs::remove_file(&file).unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn github_and_tap_follow_their_grammars() {
    let (code, out) = plugins_in("github");
    assert_eq!(code, 1);
    let command = regex::Regex::new(
        r"^::(error|warning) file=[^,:%]+(,line=[0-9]+)?,title=[^,:]+::[^\r\n]+$",
    )
    .unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    for line in &lines[..3] {
        assert!(command.is_match(line), "{line}");
    }
    assert!(lines[0].starts_with("::error file=") && lines[0].contains(",line=4,"));
    assert!(lines[2].starts_with("::warning "));
    assert_eq!(lines[3], "compliance: 2 files, 3 violations, 1 blocked");

    let (code, out) = plugins_in("tap");
    assert_eq!(code, 1);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("TAP version 13"));
    // Debian's prove reads it: no parse error; the two blocking violations fail, the
    // warning (TODO) and the two skips pass.
    let proved = through_prove(&out);
    assert!(!proved.contains("Parse errors"), "{proved}");
    assert!(proved.contains("Failed 2/8 subtests"), "{proved}");
    assert!(proved.contains("less 2 skipped subtests"), "{proved}");
    assert!(proved.contains("Failed tests:  5-6"), "{proved}");
    assert_eq!(lines.next(), Some("1..8"));
    let point = regex::Regex::new(r"^(not )?ok ([0-9]+) - [^#]+( # (SKIP|TODO) .+)?$").unwrap();
    let mut numbers = Vec::new();
    let mut in_block = false;
    for line in lines {
        if in_block {
            in_block = line != "  ...";
            assert!(line.starts_with("  "), "{line}");
            continue;
        }
        if line == "  ---" {
            in_block = true;
            continue;
        }
        let captures = point.captures(line).unwrap_or_else(|| panic!("{line}"));
        numbers.push(captures[2].parse::<usize>().unwrap());
    }
    assert_eq!(numbers, (1..=8).collect::<Vec<_>>());
    assert_eq!(out.matches("\nnot ok ").count(), 3, "{out}");
    assert_eq!(out.matches("# TODO warning").count(), 1);
    assert_eq!(out.matches("# SKIP").count(), 2);
}

#[test]
fn hostile_names_and_values_cannot_forge_output() {
    let rules = write(
        "hostile.json",
        r#"[{"id": "r,1", "name": "evil:\nname, <b>&", "target": "plugin", "severity": "error",
            "field": "v", "operator": "eq", "value": "ok"}]"#,
    );
    let attrs = write(
        "hostile.json",
        "{\"v\": \"x\\n::error file=forged::owned\\u001b[31m\\u0000 # not a directive\"}",
    );
    let run = |format: &str| {
        let (code, out, err) = compliance(&[
            "eval", "--rules", &rules, "--target", "plugin", "--format", format, &attrs,
        ]);
        assert_eq!(code, 1, "{format}: {err}");
        out
    };
    let github = run("github");
    assert_eq!(github.lines().count(), 2, "{github}");
    assert!(!github.lines().any(|l| l.starts_with("::error file=forged")));
    assert!(
        github.contains("title=evil%3A%0Aname%2C <b>&::"),
        "{github}"
    );
    let table = run("table");
    assert!(
        !table.contains('\u{1b}'),
        "no escape reaches the terminal: {table}"
    );
    assert!(!table.contains('\u{0}'));
    let tap = run("tap");
    assert!(tap.contains("not ok 1 - "), "{tap}");
    assert!(!tap.lines().any(|l| l.starts_with("::")), "{tap}");
    let junit = run("junit");
    jenkins_junit_schema(roxmltree::Document::parse(&junit).unwrap().root_element());
    let proved = through_prove(&tap);
    assert!(!proved.contains("Parse errors"), "{proved}");
    let sarif: Value = serde_json::from_str(&run("sarif")).unwrap();
    assert_eq!(sarif["runs"][0]["results"][0]["ruleId"], "r,1");
}

#[test]
fn yaml_and_json_agree() {
    let rules_json = write(
        "rules.json",
        r#"[{"id": "pin", "name": "pinned", "target": "pipeline", "severity": "error",
            "field": "props.stages.*.steps.*.plugin.version", "operator": "notIn", "value": ["latest"]},
           {"id": "few", "name": "few stages", "target": "pipeline", "severity": "warning",
            "field": "$count(props.stages)", "operator": "lt", "value": 2}]"#,
    );
    let rules_yaml = write(
        "rules.yaml",
        "- id: pin\n  name: pinned\n  target: pipeline\n  severity: error\n  field: props.stages.*.steps.*.plugin.version\n  operator: notIn\n  value: [latest]\n- id: few\n  name: few stages\n  target: pipeline\n  severity: warning\n  field: $count(props.stages)\n  operator: lt\n  value: 2\n",
    );
    let deploy = example_file("pipelines/deploy.yaml");
    let deploy_json = write(
        "deploy.json",
        r#"{"name": "deploy", "props": {"stages": [
            {"stageName": "build", "steps": [{"plugin": {"name": "eslint", "version": "8.57.0"}}]},
            {"stageName": "ship", "steps": [{"plugin": {"name": "fetcher", "version": "latest"}}]}]}}"#,
    );
    let mut answers = Vec::new();
    for rules in [&rules_json, &rules_yaml] {
        for attrs in [&deploy, &deploy_json] {
            let (code, out, err) =
                compliance(&["eval", "--rules", rules, "--target", "pipeline", attrs]);
            assert_eq!(code, 1, "{err}");
            let report: Value = serde_json::from_str(&out).unwrap();
            answers.push(report["files"][0]["violations"].clone());
        }
    }
    assert_eq!(answers[0].as_array().unwrap().len(), 2);
    assert!(answers.iter().all(|a| a == &answers[0]), "{answers:#?}");
}

#[test]
fn many_files_globs_and_standard_input() {
    let rules = example_file("rules.yaml");
    let glob = example_file("plugins/*");
    let fetcher = std::fs::read_to_string(example().join("plugins/fetcher.yaml")).unwrap();
    let eslint = std::fs::read_to_string(example().join("plugins/eslint.json")).unwrap();

    let (code, out, err) = compliance(&["eval", "--rules", &rules, "--target", "plugin", &glob]);
    assert_eq!(code, 1, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let files: Vec<&str> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert_eq!(files.len(), 2);
    assert!(files[0].ends_with("eslint.json") && files[1].ends_with("fetcher.yaml"));
    assert_eq!(report["files"][0]["blocked"], false);
    assert_eq!(report["files"][1]["blocked"], true);

    // Standard input, YAML and JSON, beside a file.
    let (code, out, err) = compliance_with_stdin(
        &["eval", "--rules", &rules, "--target", "plugin", "-", &glob],
        &fetcher,
    );
    assert_eq!(code, 1, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["files"][0]["file"], "-");
    assert_eq!(
        report["files"][0]["violations"].as_array().unwrap().len(),
        3
    );
    let (code, out, _) = compliance_with_stdin(
        &["eval", "--rules", &rules, "--target", "plugin", "-"],
        &eslint,
    );
    assert_eq!(code, 0, "{out}");
    // The rules from standard input.
    let rules_text = std::fs::read_to_string(example().join("rules.yaml")).unwrap();
    let (code, _, err) = compliance_with_stdin(
        &["eval", "--rules", "-", "--target", "plugin", &glob],
        &rules_text,
    );
    assert_eq!(code, 1, "{err}");

    // Bad input: stdin twice, a glob of nothing, a limit passed.
    let deep = write("deep.json", r#"{"a": {"b": {"c": 1}}}"#);
    let wide = write("wide.yaml", "a: 1\nb: 2\nc: 3\n");
    let nothing = example_file("plugins/*.toml");
    for (args, input, needle) in [
        (
            vec!["eval", "--rules", "-", "--target", "plugin", "-"],
            rules_text.as_str(),
            "only once",
        ),
        (
            vec!["eval", "--rules", &rules, "--target", "plugin", &nothing],
            "",
            "matches no file",
        ),
        (
            vec![
                "eval",
                "--rules",
                &rules,
                "--target",
                "plugin",
                "--max-depth",
                "2",
                &deep,
            ],
            "",
            "deep",
        ),
        (
            vec![
                "eval",
                "--rules",
                &rules,
                "--target",
                "plugin",
                "--max-keys",
                "2",
                &wide,
            ],
            "",
            "keys",
        ),
        (
            vec!["eval", "--rules", &rules, "--target", "plugin", "-"],
            "[1, 2]",
            "object",
        ),
        (
            vec!["eval", "--rules", &rules, "--target", "plugin", "-"],
            "a: [b",
            "-",
        ),
    ] {
        let (code, out, err) = compliance_with_stdin(&args, input);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(out.is_empty());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // The limits of the server by default: 10 deep is fine, 11 is not.
    let nested = |n: usize| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
    let ten = write("ten.json", &nested(10));
    let eleven = write("eleven.json", &nested(11));
    assert_ne!(
        compliance(&["eval", "--rules", &rules, "--target", "plugin", &ten]).0,
        2
    );
    assert_eq!(
        compliance(&["eval", "--rules", &rules, "--target", "plugin", &eleven]).0,
        2
    );
}

#[test]
fn table_has_no_colour_off_a_terminal_and_help_names_the_exit_codes() {
    let (code, out) = plugins_in("table");
    assert_eq!(code, 1);
    assert!(!out.contains('\u{1b}'), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("FILE") && lines[0].ends_with("MESSAGE"));
    // The columns line up: SEVERITY starts at the same place on every row.
    let at = lines[0].find("SEVERITY").unwrap();
    for row in &lines[1..4] {
        let rest = &row[at..];
        assert!(
            ["error", "critical", "warning"]
                .iter()
                .any(|s| rest.starts_with(s)),
            "{row}"
        );
    }
    assert_eq!(lines.last(), Some(&"2 files, 3 violations, 1 blocked"));

    for verb in ["eval", "test"] {
        let (code, out, _) = compliance(&[verb, "--help"]);
        assert_eq!(code, 0);
        assert!(out.contains("Exit codes:"), "{out}");
        assert!(out.contains("  2  bad input"), "{out}");
    }
}
