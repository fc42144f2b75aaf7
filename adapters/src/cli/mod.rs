//! The offline verbs: `token`, `eval`, `test`, `entitlements`, `audit verify`.

pub mod args;
pub mod eval;
pub mod format;
pub mod generate;
pub mod locate;
pub mod platform;
pub mod source;
pub mod suite;

use std::time::Duration;

use chrono::Utc;
use entitlements::{apply_change, effective, Account, BundleChange, BundleId, Catalog, Tier};
use serde_json::Value;

use crate::auth::{Claims, TokenKeys};
use crate::config::{parse_duration, Config};

/// A verb's failure: the one line to print, and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// The line.
    pub message: String,
    /// The exit code.
    pub code: i32,
}

pub(crate) fn bad_input(message: impl Into<String>) -> Failure {
    Failure {
        message: message.into(),
        code: 2,
    }
}

/// `compliance token`: a signed JWT for development and tests.
pub fn token(
    config: &Config,
    sub: &str,
    email: Option<&str>,
    service: Option<&str>,
    ttl: Option<&str>,
    step_up: bool,
) -> Result<String, Failure> {
    let ttl = match ttl {
        None => config.jwt.expires_in,
        Some(text) => parse_duration(text).ok_or_else(|| {
            bad_input(format!(
                "--ttl: `{text}` is not a duration such as 2h, 30m or 7200"
            ))
        })?,
    };
    let ttl = ttl
        .min(crate::config::MAX_TOKEN_LIFETIME)
        .max(Duration::from_secs(1));
    let mut claims = Claims::user(sub, email, Utc::now(), ttl);
    claims.service = service.map(str::to_owned);
    claims.step_up = step_up;
    TokenKeys::hs256(config.jwt.secret.expose())
        .sign(&claims)
        .map_err(|e| bad_input(e.to_string()))
}

/// `compliance entitlements`: effective limits for a tier and bundles `ID[:QTY]`.
pub fn entitlements(catalog: &Catalog, tier: &str, bundles: &[String]) -> Result<Value, Failure> {
    let tier = Tier::parse(tier).ok_or_else(|| {
        bad_input(format!(
            "--tier: `{tier}` is not developer, pro, team or enterprise"
        ))
    })?;
    let mut account = Account::on(tier);
    // Bundles given on the command line are computed as a preview even when the
    // operator has not enabled them for purchase.
    let mut preview = catalog.clone();
    preview.bundles_enabled = true;
    for spec in bundles {
        let (id, quantity) = match spec.split_once(':') {
            Some((id, q)) => (
                id,
                q.parse::<u32>()
                    .map_err(|_| bad_input(format!("--bundle {spec}: `{q}` is not a quantity")))?,
            ),
            None => (spec.as_str(), 1),
        };
        let bundle = BundleId::parse(id)
            .ok_or_else(|| bad_input(format!("--bundle {spec}: unknown bundle `{id}`")))?;
        let (next, _) = apply_change(&preview, &account, BundleChange::Set { bundle, quantity })
            .map_err(|e| bad_input(format!("--bundle {spec}: {e}")))?;
        account = next;
    }
    serde_json::to_value(effective(catalog, &account)).map_err(|e| bad_input(e.to_string()))
}

/// The sample content shipped with the project (`content/`): published rules and
/// starter policies. They are data, loaded through the API like any client would.
pub const PUBLISHED_RULES: &str = include_str!("../../../content/published-rules.json");
/// The starter policies: named groups of the published rules, by rule name.
pub const STARTER_POLICIES: &str = include_str!("../../../content/starter-policies.json");

/// What `load-content` did.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Loaded {
    /// Rules registered.
    pub rules_created: usize,
    /// Rules already present (same name), left as they are.
    pub rules_skipped: usize,
    /// Template policies registered.
    pub policies_created: usize,
    /// Policies already present.
    pub policies_skipped: usize,
}

/// `compliance load-content`: registers the published rules and the starter policies
/// (as template policies) through the API of the server at `url`, as the system
/// organization `org`. Running it twice changes nothing.
pub async fn load_content(url: &str, token: &str, org: &str) -> Result<Loaded, Failure> {
    let http = reqwest::Client::new();
    let base = url.trim_end_matches('/');
    let fail = |message: String| Failure { message, code: 1 };
    let post = |path: &str, body: &Value| {
        http.post(format!("{base}/api{path}"))
            .bearer_auth(token)
            .header("x-org-id", org)
            .json(body)
            .send()
    };
    let rules: Vec<Value> =
        serde_json::from_str(PUBLISHED_RULES).map_err(|e| fail(format!("content: {e}")))?;
    let mut loaded = Loaded::default();
    for mut rule in rules {
        if let Some(object) = rule.as_object_mut() {
            object.insert("scope".into(), Value::from("published"));
        }
        let response = post("/compliance/rules", &rule)
            .await
            .map_err(|e| fail(format!("{base}: {e}")))?;
        match response.status().as_u16() {
            201 => loaded.rules_created += 1,
            409 => loaded.rules_skipped += 1,
            status => {
                let body = response.text().await.unwrap_or_default();
                return Err(fail(format!(
                    "registering `{}` answered {status}: {body}",
                    rule.get("name").unwrap_or(&Value::Null)
                )));
            }
        }
    }
    let listed: Value = http
        .get(format!(
            "{base}/api/compliance/rules?scope=published&limit=1000"
        ))
        .bearer_auth(token)
        .header("x-org-id", org)
        .send()
        .await
        .map_err(|e| fail(format!("{base}: {e}")))?
        .json()
        .await
        .map_err(|e| fail(format!("listing rules: {e}")))?;
    let ids: std::collections::HashMap<String, String> = listed
        .get("rules")
        .unwrap_or(&Value::Null)
        .as_array()
        .map(|rules| {
            rules
                .iter()
                .filter_map(|r| {
                    Some((r["name"].as_str()?.to_owned(), r["id"].as_str()?.to_owned()))
                })
                .collect()
        })
        .unwrap_or_default();
    let policies: Vec<Value> =
        serde_json::from_str(STARTER_POLICIES).map_err(|e| fail(format!("content: {e}")))?;
    for policy in policies {
        let rule_ids: Vec<&String> = policy
            .get("rules")
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().and_then(|n| ids.get(n)))
                    .collect()
            })
            .unwrap_or_default();
        let name = policy.get("name").cloned().unwrap_or(Value::Null);
        let body = serde_json::json!({"name": name, "description": policy.get("description"), "ruleIds": rule_ids, "isTemplate": true});
        let response = post("/compliance/policies", &body)
            .await
            .map_err(|e| fail(format!("{base}: {e}")))?;
        match response.status().as_u16() {
            201 => loaded.policies_created += 1,
            409 => loaded.policies_skipped += 1,
            status => {
                let body = response.text().await.unwrap_or_default();
                return Err(fail(format!(
                    "registering policy `{name}` answered {status}: {body}"
                )));
            }
        }
    }
    Ok(loaded)
}

/// A value that is either the text itself or a file holding it.
fn text_or_file(value: &str) -> Result<String, Failure> {
    if std::path::Path::new(value).is_file() {
        std::fs::read_to_string(value).map_err(|e| bad_input(format!("{value}: {e}")))
    } else {
        Ok(value.to_owned())
    }
}

/// `compliance audit verify`: streams an export through the chain verifier and, when
/// checkpoints are present (a leading `{"checkpoint": ...}` line, or `--checkpoint`
/// files), checks the chain against them with `key`. Returns the report (the API's
/// `{ok, brokenAt?, count, ..., checkpoints?}`) and whether everything holds.
pub fn verify_export(
    file: &std::path::Path,
    checkpoint_files: &[std::path::PathBuf],
    key: Option<&str>,
) -> Result<(serde_json::Value, bool), Failure> {
    let shown = file.display().to_string();
    let mut notes = Vec::new();
    for path in checkpoint_files {
        notes.push(
            std::fs::read_to_string(path)
                .map_err(|e| bad_input(format!("{}: {e}", path.display())))?,
        );
    }
    let reader = std::fs::File::open(file)
        .map(std::io::BufReader::new)
        .map_err(|e| bad_input(format!("{shown}: {e}")))?;
    verify_lines(reader, &shown, notes, key)
}

/// [`verify_export`] over any reader of the export's lines (`shown` names it in
/// messages): a file, or the chain inside an organization's export archive.
fn verify_lines(
    reader: impl std::io::BufRead,
    shown: &str,
    mut notes: Vec<String>,
    key: Option<&str>,
) -> Result<(serde_json::Value, bool), Failure> {
    let mut verifier = audit_chain::ChainVerifier::new();
    let mut check: Option<audit_chain::CheckpointCheck> = None;
    let mut rows = 0u64;
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| bad_input(format!("{shown}: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| bad_input(format!("{shown}: line {}: {e}", n + 1)))?;
        if let Some(note) = value.get("checkpoint").and_then(serde_json::Value::as_str) {
            if rows > 0 {
                return Err(bad_input(format!(
                    "{shown}: line {}: a checkpoint must come before the rows",
                    n + 1
                )));
            }
            notes.push(note.to_owned());
            continue;
        }
        let row: audit_chain::SealedEvent = serde_json::from_value(value)
            .map_err(|e| bad_input(format!("{shown}: line {}: {e}", n + 1)))?;
        if check.is_none() && !notes.is_empty() {
            let key = key.ok_or_else(|| {
                bad_input("checkpoints need --key (the verifier key, from GET /api/audit/checkpoints/key)")
            })?;
            let parsed = audit_chain::NoteVerifier::from_verifier_key(text_or_file(key)?.trim())
                .map_err(|e| bad_input(format!("--key: {e}")))?;
            check = Some(audit_chain::CheckpointCheck::new(
                &row.chain_key,
                notes.iter().map(String::as_str),
                &parsed,
            ));
        }
        rows += 1;
        if let Some(check) = &mut check {
            check.push(&row);
        }
        if !verifier.push(&row) {
            break;
        }
    }
    let chain = verifier.finish();
    if chain.count == 0 {
        return Err(bad_input(format!("{shown}: no audit rows to verify")));
    }
    let checkpoints = check.map(audit_chain::CheckpointCheck::finish);
    let ok = chain.ok && checkpoints.as_ref().is_none_or(|c| c.ok);
    let mut report = serde_json::to_value(&chain).unwrap_or_default();
    if let Some(object) = report.as_object_mut() {
        object.insert("ok".to_owned(), ok.into());
        if let Some(checkpoints) = &checkpoints {
            object.insert(
                "checkpoints".to_owned(),
                serde_json::to_value(checkpoints).unwrap_or_default(),
            );
        }
    }
    Ok((report, ok))
}

/// `compliance export verify`: the archive against its manifest, then its audit
/// chain (and checkpoint) through [`verify_export`]. Returns the report and whether
/// everything holds.
pub fn verify_org_export(
    file: &std::path::Path,
    key: Option<&str>,
) -> Result<(serde_json::Value, bool), Failure> {
    let shown = file.display().to_string();
    let (manifest, checks) =
        crate::org_export::verify(file).map_err(|e| bad_input(format!("{shown}: {e}")))?;
    let files_ok = checks.iter().all(|c| c.ok);
    let audit_listed = manifest
        .files
        .iter()
        .any(|f| f.name == crate::org_export::AUDIT_FILE && f.lines > 0);
    let audit_intact = checks
        .iter()
        .any(|c| c.name == crate::org_export::AUDIT_FILE && c.ok);
    let chain = if audit_listed && audit_intact {
        // Read from the archive as it is, through the chain's own verifier.
        let mut archive = std::fs::File::open(file)
            .map_err(|e| e.to_string())
            .and_then(|f| zip::ZipArchive::new(f).map_err(|e| e.to_string()))
            .map_err(|e| bad_input(format!("{shown}: {e}")))?;
        let entry = archive
            .by_name(crate::org_export::AUDIT_FILE)
            .map_err(|e| bad_input(format!("{shown}: {e}")))?;
        let name = format!("{shown}: {}", crate::org_export::AUDIT_FILE);
        Some(verify_lines(
            std::io::BufReader::new(entry),
            &name,
            Vec::new(),
            key,
        )?)
    } else {
        None
    };
    let chain_ok = chain.as_ref().is_none_or(|(_, ok)| *ok) && (audit_intact || !audit_listed);
    let ok = files_ok && chain_ok;
    let report = serde_json::json!({
        "ok": ok,
        "orgId": manifest.org_id,
        "createdAt": manifest.created_at,
        "files": checks,
        "audit": chain.map(|(report, _)| report),
    });
    Ok((report, ok))
}
