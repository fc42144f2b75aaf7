//! The offline verbs: `token`, `eval` and `entitlements`.

use std::time::Duration;

use chrono::Utc;
use compliance_core::{
    AttributeLimits, Attributes, CompileOptions, RegexLimits, Rule, RuleSet, Target, Waivers,
};
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

fn bad_input(message: impl Into<String>) -> Failure {
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
    super_admin: bool,
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
    claims.super_admin = super_admin;
    claims.service = service.map(str::to_owned);
    claims.step_up = step_up;
    TokenKeys::hs256(&config.jwt.secret)
        .sign(&claims)
        .map_err(|e| bad_input(e.message))
}

/// `compliance eval`: the validation result for an attributes file, and whether
/// it is blocked.
pub fn eval(
    config: &Config,
    rules_json: &str,
    target: &str,
    attributes_json: &str,
) -> Result<(Value, bool), Failure> {
    let target: Target = target
        .parse()
        .map_err(|e: String| bad_input(format!("--target: {e}")))?;
    let rules: Vec<Rule> =
        serde_json::from_str(rules_json).map_err(|e| bad_input(format!("rules: {e}")))?;
    let options = CompileOptions {
        regex: RegexLimits {
            max_length: config.compliance.max_regex_length,
            ..RegexLimits::default()
        },
        ..CompileOptions::default()
    };
    let set = RuleSet::compile(rules, &options).map_err(|e| bad_input(format!("rules: {e}")))?;
    let limits: AttributeLimits = config.attribute_limits();
    let depth = compliance_core::json_text_depth(attributes_json);
    if depth > limits.max_depth {
        return Err(bad_input(format!(
            "attributes: the document is {depth} deep; at most {} is allowed",
            limits.max_depth
        )));
    }
    let document: Value =
        serde_json::from_str(attributes_json).map_err(|e| bad_input(format!("attributes: {e}")))?;
    let attributes =
        Attributes::new(&document, &limits).map_err(|e| bad_input(format!("attributes: {e}")))?;
    let result = set.evaluate(target, &attributes, &Waivers::none());
    let blocked = result.blocked;
    let json = serde_json::json!({
        "blocked": result.blocked,
        "violations": result.violations,
        "exempted": result.exempted,
    });
    Ok((json, blocked))
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
