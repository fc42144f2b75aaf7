//! The binary's offline verbs, run as a user runs them.

use std::process::Command;

use serde_json::Value;

pub(crate) fn compliance(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_compliance"))
        .args(args)
        .env_remove("JWT_SECRET")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub(crate) fn write(name: &str, text: &str) -> String {
    let path = std::env::temp_dir().join(format!("{}-{name}", uuid::Uuid::new_v4()));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn eval_exits_0_when_passing_1_when_blocked_2_on_bad_input() {
    let rules = write(
        "rules.json",
        r#"[{"id": "semver", "name": "semver", "target": "plugin", "severity": "error",
        "field": "version", "operator": "regex", "value": "^\\d+\\.\\d+\\.\\d+$"}]"#,
    );
    let good = write("good.json", r#"{"version": "1.2.3"}"#);
    let bad = write("bad.json", r#"{"version": "latest"}"#);
    let (code, out, _) = compliance(&["eval", "--rules", &rules, "--target", "plugin", &good]);
    assert_eq!(code, 0);
    let result: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(result["blocked"], false);
    let (code, out, _) = compliance(&["eval", "--rules", &rules, "--target", "plugin", &bad]);
    assert_eq!(code, 1);
    let result: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(result["blocked"], true);
    let file = &result["files"][0];
    assert_eq!(file["file"], bad.as_str());
    assert_eq!(file["violations"][0]["ruleId"], "semver");
    assert!(file["exempted"].as_array().unwrap().is_empty());
    let deep = write(
        "deep.json",
        &format!("{{\"a\":{}1{}}}", "[".repeat(50), "]".repeat(50)),
    );
    let broken_rules = write(
        "broken.json",
        r#"[{"name": "x", "target": "plugin", "severity": "error", "field": "a", "operator": "in", "value": 1}]"#,
    );
    for args in [
        vec!["eval", "--rules", &rules, "--target", "widget", &good],
        vec![
            "eval",
            "--rules",
            &rules,
            "--target",
            "plugin",
            "/no/such/file.json",
        ],
        vec!["eval", "--rules", &rules, "--target", "plugin", &deep],
        vec![
            "eval",
            "--rules",
            &broken_rules,
            "--target",
            "plugin",
            &good,
        ],
        vec!["eval", "--rules", &good, "--target", "plugin", &good],
    ] {
        let (code, out, err) = compliance(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty());
        assert_eq!(err.lines().count(), 1, "one clear line: {err}");
        assert!(!err.contains("panicked"));
    }
}

#[tokio::test]
async fn entitlements_and_tokens() {
    let (code, out, _) = compliance(&[
        "entitlements",
        "--tier",
        "pro",
        "--bundle",
        "SEAT_PACK:2",
        "--bundle",
        "sso",
    ]);
    assert_eq!(code, 0);
    let e: Value = serde_json::from_str(&out).unwrap();
    let seats = e["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["dimension"] == "seats")
        .unwrap();
    assert_eq!(seats["total"], 11);
    let (code, _, err) = compliance(&["entitlements", "--tier", "developer", "--bundle", "SSO"]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    let (code, out, _) = compliance(&[
        "token",
        "--sub",
        "alice",
        "--email",
        "a@example.com",
        "--ttl",
        "10m",
    ]);
    assert_eq!(code, 0);
    let claims = adapters::auth::TokenKeys::hs256(adapters::config::DEV_JWT_SECRET)
        .verify(out.trim())
        .await
        .unwrap();
    assert_eq!(
        (claims.sub.as_str(), claims.exp - claims.iat.unwrap()),
        ("alice", 600)
    );
    // There is no way to mint a super-admin token.
    let (code, _, err) = compliance(&["token", "--sub", "a", "--super-admin"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = compliance(&["token", "--sub", "a", "--ttl", "forever"]);
    assert_eq!(code, 2, "{err}");
    for verb in ["serve", "migrate", "token", "eval", "test", "entitlements"] {
        let (code, out, _) = compliance(&[verb, "--help"]);
        assert_eq!(code, 0, "{verb}");
        assert!(out.contains("Usage"), "{verb}");
    }
}

#[tokio::test]
async fn audit_export_then_offline_verify() {
    let path = std::env::temp_dir().join(format!("audit-cli-{}.db", uuid::Uuid::new_v4()));
    let url = format!("sqlite://{}", path.display());
    let store = adapters::storage::Store::connect(&url).await.unwrap();
    adapters::services::operations::migrate(&store)
        .await
        .unwrap();
    for n in 0..5 {
        let event = audit_chain::AuditEvent {
            id: format!("e{n}"),
            action: "plugin.upload".into(),
            actor_id: "u".into(),
            actor_email: None,
            org_id: "org-x".into(),
            affected_org_id: None,
            target_type: None,
            target_id: Some(format!("p{n}")),
            details: serde_json::json!({"n": n, "ratio": 0.1}),
            outcome: None,
            occurred_at: chrono::Utc::now(),
            service: Some("plugin".into()),
            idempotency_key: Some(format!("k{n}")),
        };
        store.append_audit(event, chrono::Utc::now()).await.unwrap();
    }
    store.close().await;
    let out = Command::new(env!("CARGO_BIN_EXE_compliance"))
        .args(["audit", "export", "--org", "org-x"])
        .env("DATABASE_URL", &url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let export = String::from_utf8(out.stdout).unwrap();
    assert_eq!(export.lines().count(), 5);
    let file = write("chain.jsonl", &export);
    let (code, out, _) = compliance(&["audit", "verify", &file]);
    assert_eq!(code, 0);
    let verdict: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (verdict["ok"].as_bool(), verdict["count"].as_u64()),
        (Some(true), Some(5))
    );
    // Drop the first two lines (pruned) and it still verifies; edit a row and it does not.
    let pruned: Vec<&str> = export.lines().skip(2).collect();
    let (code, _, _) = compliance(&[
        "audit",
        "verify",
        &write("pruned.jsonl", &pruned.join("\n")),
    ]);
    assert_eq!(code, 0);
    let tampered = export.replacen("\"actorId\":\"u\"", "\"actorId\":\"mallory\"", 2);
    let (code, out, _) = compliance(&["audit", "verify", &write("tampered.jsonl", &tampered)]);
    assert_eq!(code, 1);
    let verdict: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(verdict["brokenAt"]["seq"], 1);
    let (code, _, err) = compliance(&["audit", "verify", &write("junk.jsonl", "not json\n")]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
}

/// Runs the binary with its standard output read by a reader that closes it after
/// `keep` bytes (what `| head -c` does).
fn compliance_into_closed_pipe(args: &[&str], keep: usize) -> (i32, String) {
    use std::io::Read;
    use std::process::Stdio;
    let mut command = Command::new(env!("CARGO_BIN_EXE_compliance"));
    command
        .args(args)
        .env_remove("JWT_SECRET")
        .env_remove("DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut head = vec![0u8; keep];
    stdout.read_exact(&mut head).unwrap();
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (child.wait().unwrap().code().unwrap_or(-1), stderr)
}

#[test]
/// Every verb prints through the same writer; `eval` with more output than a pipe
/// holds is the one that meets the closed pipe for sure.
fn output_ends_quietly_on_a_closed_pipe() {
    // Many violations, so that the output is larger than the pipe's buffer.
    let rules: Vec<Value> = (0..400)
        .map(|i| {
            serde_json::json!({"id": format!("r{i}"), "name": format!("rule {i}"), "target": "plugin",
                "severity": "error", "field": "version", "operator": "eq", "value": format!("v{i}")})
        })
        .collect();
    let rules = write("many.json", &serde_json::to_string(&rules).unwrap());
    let attrs = write("attrs.json", r#"{"version": "latest"}"#);
    let (code, stderr) = compliance_into_closed_pipe(
        &["eval", "--rules", &rules, "--target", "plugin", &attrs],
        10,
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn audit_export_never_creates_a_database() {
    let path = std::env::temp_dir().join(format!("missing-{}.db", uuid::Uuid::new_v4()));
    let url = format!("sqlite://{}", path.display());
    let out = Command::new(env!("CARGO_BIN_EXE_compliance"))
        .args(["audit", "export", "--org", "org-1"])
        .env("DATABASE_URL", &url)
        .env_remove("JWT_SECRET")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(!path.exists(), "export created {}", path.display());
    // An empty export is not a verified chain.
    let empty = write("empty.jsonl", "");
    let (code, _, stderr) = compliance(&["audit", "verify", &empty]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no audit rows"), "{stderr}");
}

#[tokio::test]
async fn an_export_with_its_checkpoint_verifies_alone_and_shows_truncation() {
    use adapters::storage::Store;
    let path = std::env::temp_dir().join(format!("compliance-cp-{}.db", uuid::Uuid::new_v4()));
    let url = format!("sqlite://{}", path.display());
    let store = Store::connect(&url).await.unwrap();
    adapters::services::operations::migrate(&store)
        .await
        .unwrap();
    let now = chrono::Utc::now();
    for n in 0..10 {
        let event = audit_chain::AuditEvent {
            id: format!("e{n}"),
            action: "plugin.upload".into(),
            actor_id: "u".into(),
            actor_email: None,
            org_id: "org-x".into(),
            affected_org_id: None,
            target_type: None,
            target_id: None,
            details: serde_json::json!({"n": n}),
            outcome: None,
            occurred_at: now,
            service: Some("plugin".into()),
            idempotency_key: None,
        };
        store.append_audit(event, now).await.unwrap();
    }
    let settings = crate::test_config(&[]).checkpoints.unwrap();
    adapters::workers::checkpoints::round(&store, &settings, now)
        .await
        .unwrap();
    store.close().await;
    let key = settings.signer.verifier_key();
    let out = Command::new(env!("CARGO_BIN_EXE_compliance"))
        .args(["audit", "export", "--org", "org-x", "--checkpoint"])
        .env("DATABASE_URL", &url)
        .env_remove("JWT_SECRET")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let export = String::from_utf8(out.stdout).unwrap();
    assert!(export.starts_with("{\"checkpoint\":"), "{export}");
    let file = write("bundle.jsonl", &export);
    let (code, report, err) = compliance(&["audit", "verify", &file, "--key", &key]);
    assert_eq!(code, 0, "{report}{err}");
    let report: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["checkpoints"]["ok"], true, "{report}");
    // A checkpoint without the key to check it: bad input.
    let (code, _, err) = compliance(&["audit", "verify", &file]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--key"), "{err}");
    // The newest three rows cut from the export: truncation, exit 1.
    let lines: Vec<&str> = export.lines().collect();
    let cut = write("cut.jsonl", &lines[..lines.len() - 3].join("\n"));
    let (code, report, _) = compliance(&["audit", "verify", &cut, "--key", &key]);
    assert_eq!(code, 1, "{report}");
    let report: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(
        report["checkpoints"]["problem"]["kind"], "truncated",
        "{report}"
    );
    // The same check with the checkpoint in a file of its own.
    let note = serde_json::from_str::<Value>(lines[0]).unwrap()["checkpoint"]
        .as_str()
        .unwrap()
        .to_owned();
    let note_file = write("cp.note", &note);
    let rows_only = write("rows.jsonl", &lines[1..lines.len() - 3].join("\n"));
    let (code, report, _) = compliance(&[
        "audit",
        "verify",
        &rows_only,
        "--checkpoint",
        &note_file,
        "--key",
        &key,
    ]);
    assert_eq!(code, 1, "{report}");
    // Another key: the checkpoint is refused.
    let other = audit_chain::NoteSigner::from_seed("PeterNeumann", [5; 32]).unwrap();
    let (code, report, _) = compliance(&["audit", "verify", &file, "--key", &other.verifier_key()]);
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("badSignature"), "{report}");
}

#[test]
fn a_checkpoint_key_is_made_and_read_back_from_a_file() {
    let out = Command::new(env!("CARGO_BIN_EXE_compliance"))
        .args(["checkpoint-key", "--name", "acme-audit"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let private = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let signer = audit_chain::NoteSigner::from_private_key(private.trim()).unwrap();
    assert!(stderr.contains(&signer.verifier_key()), "{stderr}");
    // Two keys are never the same.
    let again = Command::new(env!("CARGO_BIN_EXE_compliance"))
        .args(["checkpoint-key", "--name", "acme-audit"])
        .output()
        .unwrap();
    assert_ne!(again.stdout, private.as_bytes());
    // AUDIT_CHECKPOINT_KEY may name the file.
    let file = write("checkpoint.key", &private);
    let config =
        adapters::config::Config::from_vars(vec![("AUDIT_CHECKPOINT_KEY".to_owned(), file)])
            .unwrap();
    let settings = config.checkpoints.unwrap();
    assert_eq!(settings.signer.verifier_key(), signer.verifier_key());
    assert_eq!(settings.origin, "acme-audit");
    // A bad key is refused by name.
    let errors = adapters::config::Config::from_vars(vec![(
        "AUDIT_CHECKPOINT_KEY".to_owned(),
        "PRIVATE+KEY+x+00000000+AAAA".to_owned(),
    )])
    .unwrap_err();
    assert!(
        errors.iter().any(|e| e.variable == "AUDIT_CHECKPOINT_KEY"),
        "{errors:?}"
    );
    let (code, _, _) = compliance(&["checkpoint-key", "--name", "has space"]);
    assert_eq!(code, 2);
}
