//! The organization's compliance posture, read from the results kept with each entity
//! (set at the door, by the re-evaluation worker and by scans): nothing is evaluated
//! at read time. Also as a Kubernetes `PolicyReport` (wgpolicyk8s.io/v1alpha2), so
//! that report tooling made for Kyverno and its peers reads it.

use chrono::Utc;
use compliance_core::{Severity, Target};
use serde_json::{json, Value};

use super::{ServiceError, ServiceResult};
use crate::inventory::{EntityCompliance, EntityResult};
use crate::services::context::AppState;
use crate::storage::{FailingRule, OrgRecord, PipelineFilter, PluginFilter, StatusCounts};

/// The most rules a posture lists.
pub const MAX_TOP_RULES: u32 = 100;

fn targets(target: Option<&str>) -> ServiceResult<Vec<Target>> {
    match target {
        None => Ok(vec![Target::Plugin, Target::Pipeline]),
        Some(t) => t
            .parse()
            .map(|t| vec![t])
            .map_err(|_| ServiceError::invalid("target", "must be plugin or pipeline")),
    }
}

/// Entities by current result (in all and per target) and the `top` rules failing
/// most.
pub async fn posture(
    state: &AppState,
    org: &OrgRecord,
    target: Option<&str>,
    top: u32,
) -> ServiceResult<Value> {
    let top = top.clamp(1, MAX_TOP_RULES);
    let mut all = StatusCounts::default();
    let mut by_target = serde_json::Map::new();
    let mut failing: Vec<FailingRule> = Vec::new();
    for t in targets(target)? {
        let counts = state.store.status_counts(&org.id, t.as_str()).await?;
        all.total += counts.total;
        all.pass += counts.pass;
        all.warn += counts.warn;
        all.block += counts.block;
        all.error += counts.error;
        by_target.insert(t.as_str().to_owned(), json!(counts));
        failing.extend(state.store.failing_rules(&org.id, t.as_str(), top).await?);
    }
    failing.sort_by(|a, b| {
        b.violations
            .cmp(&a.violations)
            .then_with(|| a.rule_name.cmp(&b.rule_name))
    });
    failing.truncate(usize::try_from(top).unwrap_or(usize::MAX));
    Ok(json!({
        "orgId": org.id,
        "entities": all,
        "byTarget": by_target,
        "topFailingRules": failing,
        "generatedAt": Utc::now(),
    }))
}

/// One entity's stored result, as report results.
fn entity_results(
    target: Target,
    (id, name): (&str, &str),
    compliance: &EntityCompliance,
    timestamp: i64,
) -> Vec<Value> {
    let policy = format!("compliance-{}", target.as_str());
    let kind = match target {
        Target::Plugin => "Plugin",
        Target::Pipeline => "Pipeline",
    };
    let resource = json!([{"apiVersion": "compliance/v1", "kind": kind, "name": name, "uid": id}]);
    let base = |rule: &str, result: &str, message: String| {
        json!({
            "source": "compliance",
            "policy": policy,
            "rule": rule,
            "result": result,
            "message": message,
            "scored": true,
            "resources": resource,
            "timestamp": {"seconds": timestamp, "nanos": 0},
        })
    };
    match compliance.result {
        EntityResult::Pass if compliance.violations.is_empty() => {
            vec![base("all", "pass", "every rule passed".to_owned())]
        }
        EntityResult::Pass | EntityResult::Warn | EntityResult::Block => compliance
            .violations
            .iter()
            .map(|v| {
                let (result, level) = v.severity().policy_report();
                let mut item = base(v.rule_name(), result, v.message());
                if let Some(object) = item.as_object_mut() {
                    object.insert("severity".to_owned(), json!(level));
                    object.insert(
                        "properties".to_owned(),
                        json!({
                            "ruleId": v.rule_id(),
                            "field": v.field(),
                            "severity": v.severity(),
                        }),
                    );
                }
                item
            })
            .collect(),
        EntityResult::Error => vec![base(
            "all",
            "error",
            "the entity could not be judged".to_owned(),
        )],
    }
}

/// The annotation that carries how many entities the report's pages hold.
pub const PAGE_TOTAL: &str = "compliance/page-total";
/// The annotation that carries the page's size.
pub const PAGE_LIMIT: &str = "compliance/page-limit";
/// The annotation that carries the page's offset.
pub const PAGE_OFFSET: &str = "compliance/page-offset";

/// A `PolicyReport` of the organization's entities of `target`: the summary over all
/// of them, the results of a page of them (by creation); the page is described in
/// `metadata.annotations` ([`PAGE_TOTAL`], [`PAGE_LIMIT`], [`PAGE_OFFSET`]).
pub async fn policy_report(
    state: &AppState,
    org: &OrgRecord,
    target: &str,
    limit: u32,
    offset: u64,
) -> ServiceResult<Value> {
    let t = targets(Some(target))?
        .first()
        .copied()
        .ok_or_else(|| ServiceError::invalid("target", "must be plugin or pipeline"))?;
    let counts = state.store.status_counts(&org.id, t.as_str()).await?;
    let (mut fail, mut warn) = (0u64, 0u64);
    for rule in state
        .store
        .failing_rules(&org.id, t.as_str(), u32::MAX)
        .await?
    {
        match serde_json::from_value::<Severity>(json!(rule.severity)) {
            Ok(s) if s.blocks() => fail += rule.violations,
            Ok(_) => warn += rule.violations,
            Err(_) => {}
        }
    }
    let now = Utc::now();
    let mut results = Vec::new();
    let total = match t {
        Target::Pipeline => {
            let (items, total) = state
                .store
                .pipelines(
                    &org.id,
                    &PipelineFilter::default(),
                    ("createdAt", true),
                    limit,
                    offset,
                )
                .await?;
            for p in &items {
                results.extend(entity_results(
                    t,
                    (&p.id, &p.pipeline_name),
                    &p.compliance,
                    now.timestamp(),
                ));
            }
            total
        }
        Target::Plugin => {
            let (items, total) = state
                .store
                .plugins(
                    &org.id,
                    &PluginFilter::default(),
                    ("createdAt", true),
                    limit,
                    offset,
                )
                .await?;
            for p in &items {
                let name = format!("{}@{}", p.name, p.version);
                results.extend(entity_results(
                    t,
                    (&p.id, &name),
                    &p.compliance,
                    now.timestamp(),
                ));
            }
            total
        }
    };
    Ok(json!({
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": "PolicyReport",
        "metadata": {
            "name": format!("compliance-{}-{}", org.id, t.as_str()),
            "namespace": org.id,
            "creationTimestamp": now,
            // The page, where the CRD allows it (annotations are strings); a strict
            // validation refuses any top-level field the CRD does not declare.
            "annotations": {
                PAGE_TOTAL: total.to_string(),
                PAGE_LIMIT: limit.to_string(),
                PAGE_OFFSET: offset.to_string(),
            },
        },
        "summary": {
            "pass": counts.pass,
            "fail": fail,
            "warn": warn,
            "error": counts.error,
            "skip": 0,
        },
        "results": results,
    }))
}
