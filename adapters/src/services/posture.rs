//! The organization's compliance posture, read from the results kept with each entity
//! (set at the door, by the re-evaluation worker and by scans): nothing is evaluated
//! at read time. Also as a Kubernetes `PolicyReport` (wgpolicyk8s.io/v1alpha2), so
//! that report tooling made for Kyverno and its peers reads it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use compliance_core::{Severity, Target};

use super::{ServiceError, ServiceResult};
use crate::inventory::{EntityCompliance, EntityResult};
use crate::policy_report::{
    PolicyReport, ReportApiVersion, ReportKind, ReportMetadata, ReportOutcome, ReportResource,
    ReportResult, ReportSummary, ReportTimestamp,
};
pub use crate::storage::{FailingRule, JudgedFilter, StatusCounts};
use crate::storage::{OrgRecord, Store};

/// An organization's posture.
#[derive(Debug, Clone)]
pub struct Posture {
    /// The organization.
    pub org_id: String,
    /// Its entities by current result.
    pub entities: StatusCounts,
    /// The same per target.
    pub by_target: BTreeMap<Target, StatusCounts>,
    /// The rules failing most.
    pub top_failing_rules: Vec<FailingRule>,
    /// When it was read.
    pub generated_at: DateTime<Utc>,
}

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
    store: &Store,
    org: &OrgRecord,
    target: Option<&str>,
    top: u32,
) -> ServiceResult<Posture> {
    let top = top.clamp(1, MAX_TOP_RULES);
    let mut all = StatusCounts::default();
    let mut by_target = BTreeMap::new();
    let mut failing: Vec<FailingRule> = Vec::new();
    for t in targets(target)? {
        let counts = store.status_counts(&org.id, t.as_str()).await?;
        all.total += counts.total;
        all.pass += counts.pass;
        all.warn += counts.warn;
        all.block += counts.block;
        all.error += counts.error;
        by_target.insert(t, counts);
        failing.extend(store.failing_rules(&org.id, t.as_str(), top).await?);
    }
    failing.sort_by(|a, b| {
        b.violations
            .cmp(&a.violations)
            .then_with(|| a.rule_name.cmp(&b.rule_name))
    });
    failing.truncate(usize::try_from(top).unwrap_or(usize::MAX));
    Ok(Posture {
        org_id: org.id.clone(),
        entities: all,
        by_target,
        top_failing_rules: failing,
        generated_at: Utc::now(),
    })
}

/// One entity's stored result, as report results.
fn entity_results(
    target: Target,
    (id, name): (&str, &str),
    compliance: &EntityCompliance,
    timestamp: i64,
) -> Vec<ReportResult> {
    let policy = format!("compliance-{}", target.as_str());
    let kind = match target {
        Target::Plugin => "Plugin",
        Target::Pipeline => "Pipeline",
    };
    let base = |rule: &str, result: ReportOutcome, message: String| ReportResult {
        source: "compliance".into(),
        policy: policy.clone(),
        rule: rule.to_owned(),
        result,
        severity: None,
        message,
        scored: true,
        properties: None,
        resources: vec![ReportResource {
            api_version: "compliance/v1".into(),
            kind: kind.into(),
            name: name.to_owned(),
            uid: id.to_owned(),
        }],
        timestamp: ReportTimestamp {
            seconds: timestamp,
            nanos: 0,
        },
    };
    match compliance.result {
        EntityResult::Pass if compliance.violations.is_empty() => {
            vec![base(
                "all",
                ReportOutcome::Pass,
                "every rule passed".to_owned(),
            )]
        }
        EntityResult::Pass | EntityResult::Warn | EntityResult::Block => compliance
            .violations
            .iter()
            .map(|v| {
                let (result, level) = ReportOutcome::of(v.severity());
                let mut item = base(v.rule_name(), result, v.message());
                item.severity = Some(level);
                item.properties = Some(BTreeMap::from([
                    ("ruleId".to_owned(), v.rule_id().to_owned()),
                    ("field".to_owned(), v.field().to_owned()),
                    ("severity".to_owned(), v.severity().as_str().to_owned()),
                ]));
                item
            })
            .collect(),
        EntityResult::Error => vec![base(
            "all",
            ReportOutcome::Error,
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

/// The annotation that names the entities' result the report was filtered by.
pub const FILTER_STATUS: &str = "compliance/filter-status";
/// The annotation that names the rule the report was filtered by.
pub const FILTER_RULE: &str = "compliance/filter-rule";
/// An entity's current results, as a filter names them.
pub const STATUSES: [&str; 4] = ["pass", "warn", "block", "error"];

/// A `PolicyReport` of the organization's entities of `target`: the summary over all
/// of them, the results of a page of them (by creation) whose current result is
/// `filter.status` and violates `filter.rule_id` (only that rule's results then);
/// the page and the filter are described in `metadata.annotations` ([`PAGE_TOTAL`],
/// [`PAGE_LIMIT`], [`PAGE_OFFSET`], [`FILTER_STATUS`], [`FILTER_RULE`]).
pub async fn policy_report(
    store: &Store,
    org: &OrgRecord,
    (target, filter): (&str, &JudgedFilter),
    limit: u32,
    offset: u64,
) -> ServiceResult<PolicyReport> {
    if let Some(status) = filter.status.as_deref() {
        if !STATUSES.contains(&status) {
            return Err(ServiceError::invalid(
                "status",
                "must be pass, warn, block or error",
            ));
        }
    }
    let t = targets(Some(target))?
        .first()
        .copied()
        .ok_or_else(|| ServiceError::invalid("target", "must be plugin or pipeline"))?;
    let counts = store.status_counts(&org.id, t.as_str()).await?;
    let (mut fail, mut warn) = (0u64, 0u64);
    for rule in store.failing_rules(&org.id, t.as_str(), u32::MAX).await? {
        match rule.severity.parse::<Severity>() {
            Ok(s) if s.blocks() => fail += rule.violations,
            Ok(_) => warn += rule.violations,
            Err(_) => {}
        }
    }
    let now = Utc::now();
    let (entities, total) = store
        .judged(&org.id, t.as_str(), filter, limit, offset)
        .await?;
    let mut results = Vec::new();
    for entity in &entities {
        let mut judged = entity_results(
            t,
            (&entity.id, &entity.name),
            &entity.compliance,
            now.timestamp(),
        );
        if let Some(rule) = &filter.rule_id {
            judged.retain(|r| {
                r.properties
                    .as_ref()
                    .and_then(|p| p.get("ruleId"))
                    .is_some_and(|id| id == rule)
            });
        }
        results.extend(judged);
    }
    let mut annotations = BTreeMap::from([
        (PAGE_TOTAL.to_owned(), total.to_string()),
        (PAGE_LIMIT.to_owned(), limit.to_string()),
        (PAGE_OFFSET.to_owned(), offset.to_string()),
    ]);
    if let Some(status) = &filter.status {
        annotations.insert(FILTER_STATUS.to_owned(), status.clone());
    }
    if let Some(rule) = &filter.rule_id {
        annotations.insert(FILTER_RULE.to_owned(), rule.clone());
    }
    Ok(PolicyReport {
        api_version: ReportApiVersion::V1alpha2,
        kind: ReportKind::PolicyReport,
        metadata: ReportMetadata {
            name: format!("compliance-{}-{}", org.id, t.as_str()),
            namespace: org.id.clone(),
            creation_timestamp: now,
            // The page, where the CRD allows it (annotations are strings); a strict
            // validation refuses any top-level field the CRD does not declare.
            annotations,
        },
        summary: ReportSummary {
            pass: counts.pass,
            fail,
            warn,
            error: counts.error,
            skip: 0,
        },
        results,
    })
}

/// One bucket of the posture trend: for each organization read, its last snapshot
/// in the bucket, summed (`None` when no organization has one there).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct PosturePoint {
    /// The bucket's start.
    pub start: DateTime<Utc>,
    /// Entities.
    pub total: Option<u64>,
    /// Passing.
    pub pass: Option<u64>,
    /// Passing with warnings.
    pub warn: Option<u64>,
    /// Blocked.
    pub block: Option<u64>,
    /// Not judged.
    pub error: Option<u64>,
}

/// `GET /api/reports/compliance/posture-trend`: blocked and warned entities over
/// the range, from the snapshots written hourly and at the end of each scan.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostureTrendReport {
    /// What was read.
    pub scope: crate::services::reports::ReportBasis,
    /// The bucket width.
    pub granularity: reporting::Granularity,
    /// Every bucket of the range.
    pub series: Vec<PosturePoint>,
}

/// The posture trend of a report query's organizations.
pub async fn trend(
    store: &Store,
    query: &crate::services::reports::ReportQuery,
) -> ServiceResult<PostureTrendReport> {
    let snapshots = store
        .posture_snapshots(&query.org_ids, (query.range.from, query.range.to))
        .await?;
    // The last snapshot of each organization in each bucket (they come oldest first).
    let mut last: BTreeMap<(DateTime<Utc>, &str), &StatusCounts> = BTreeMap::new();
    for s in &snapshots {
        last.insert((query.granularity.bucket_of(s.at), &s.org_id), &s.counts);
    }
    let mut summed: BTreeMap<DateTime<Utc>, StatusCounts> = BTreeMap::new();
    for ((bucket, _), counts) in last {
        let sum = summed.entry(bucket).or_default();
        sum.total += counts.total;
        sum.pass += counts.pass;
        sum.warn += counts.warn;
        sum.block += counts.block;
        sum.error += counts.error;
    }
    let series = query
        .range
        .buckets(query.granularity)
        .into_iter()
        .map(|start| {
            let c = summed.get(&start);
            PosturePoint {
                start,
                total: c.map(|c| c.total),
                pass: c.map(|c| c.pass),
                warn: c.map(|c| c.warn),
                block: c.map(|c| c.block),
                error: c.map(|c| c.error),
            }
        })
        .collect();
    Ok(PostureTrendReport {
        scope: query.scope(),
        granularity: query.granularity,
        series,
    })
}

/// Writes an organization's posture snapshot at `at` (`hourly` or `scan`).
pub async fn snapshot(
    store: &Store,
    org_id: &str,
    cause: &str,
    at: DateTime<Utc>,
) -> ServiceResult<()> {
    let counts = store.entity_counts(org_id).await?;
    store
        .insert_posture_snapshot(&crate::storage::PostureSnapshot {
            org_id: org_id.to_owned(),
            at,
            cause: cause.to_owned(),
            counts,
        })
        .await?;
    Ok(())
}

/// The hourly round: a snapshot of every live organization at `at` (the hour's
/// start, so that a second round in the same hour writes nothing); how many.
pub async fn snapshot_all(store: &Store, at: DateTime<Utc>) -> ServiceResult<usize> {
    let mut after = String::new();
    let mut done = 0;
    loop {
        let ids = store.live_org_ids(&after, 500).await?;
        let Some(last) = ids.last() else {
            return Ok(done);
        };
        after = last.clone();
        for id in &ids {
            snapshot(store, id, "hourly", at).await?;
            done += 1;
        }
    }
}
