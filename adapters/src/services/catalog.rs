//! The published catalog and an organization's subscriptions to it: subscribe,
//! clone, activate, pin, and the previews of a rule (on attributes, and on the
//! entities the organization has validated). Every change drops the cached rule
//! sets it affects, on every replica; evaluations run on the CPU pool.

use chrono::{DateTime, Utc};
use compliance_core::{
    AttributeLimits, Dependencies, Evaluation, Rule, RuleSet, Scope, Target, Waivers,
};
use serde::Serialize;
use serde_json::{json, Value};

use super::rules::{check as check_rule, invalidate};
use super::{ServiceError, ServiceResult};
use crate::compliance::RuleCache;
use crate::config::Config;
use crate::cpu::CpuPool;
use crate::services::context::{event, Caller};
use crate::storage::{new_id, unit_of_work, OrgRecord, RuleFilter, Store, StoredRule};

/// How many validated entities an impact preview evaluates at most.
pub const IMPACT_SAMPLE_LIMIT: u32 = 10_000;

/// How many failing entities an impact preview shows.
pub const IMPACT_SAMPLES: usize = 10;

/// A published rule, with whether the organization subscribes to it.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogEntry {
    /// The rule as published.
    #[serde(flatten)]
    pub rule: StoredRule,
    /// The organization subscribes to it.
    pub subscribed: bool,
}

/// A subscription, with the rule as it applies (its pinned version, or the latest).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionView {
    /// The published rule's id.
    pub rule_id: String,
    /// Enforced when active.
    pub is_active: bool,
    /// The version it is pinned to.
    pub pinned_version: Option<u32>,
    /// The latest published version.
    pub latest_version: Option<u32>,
    /// The rule at the version that applies.
    pub rule: Option<Rule>,
}

/// What an impact preview found.
#[derive(Debug, Clone, Serialize)]
pub struct Impact {
    /// The rule's target.
    pub target: Target,
    /// How many entities were evaluated.
    pub evaluated: usize,
    /// How many failed.
    pub failing: usize,
    /// The first failures: `{entityId, violation}`.
    pub samples: Vec<Value>,
    /// Where the entities come from.
    pub source: &'static str,
}

/// The rules enforced on `org`: its own, its active subscriptions and the rules
/// propagated from its parent.
pub async fn enforced(store: &Store, org: &OrgRecord) -> ServiceResult<Vec<Rule>> {
    Ok(crate::compliance::effective(store, org).await?)
}

async fn published(store: &Store, rule_id: &str) -> ServiceResult<Rule> {
    store
        .published_rule(rule_id)
        .await?
        .map(|s| s.rule)
        .ok_or(ServiceError::NotFound("published rule".into()))
}

/// A page of the catalog, filtered: (entries, total).
pub async fn catalog(
    store: &Store,
    org: &OrgRecord,
    mut filter: RuleFilter,
    (limit, offset, ascending): (u32, u64, bool),
) -> ServiceResult<(Vec<CatalogEntry>, u64)> {
    filter.scope = Some("published".to_owned());
    filter.include_deleted = false;
    let (rules, total) = store.rules(None, &filter, limit, offset, ascending).await?;
    let subscriptions = store.subscriptions(&org.id).await?;
    let entries = rules
        .into_iter()
        .map(|rule| CatalogEntry {
            subscribed: subscriptions.iter().any(|s| s.rule_id == rule.rule.id),
            rule,
        })
        .collect();
    Ok((entries, total))
}

/// A page of the organization's subscriptions: (subscriptions, total).
pub async fn subscriptions(
    store: &Store,
    org: &OrgRecord,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<SubscriptionView>, u64)> {
    let (subscriptions, total) = store.subscriptions_page(&org.id, limit, offset).await?;
    let ids: Vec<String> = subscriptions.iter().map(|s| s.rule_id.clone()).collect();
    let versions = store.published_versions(&ids).await?;
    let views = subscriptions
        .into_iter()
        .map(|s| {
            let latest = versions
                .iter()
                .filter(|r| r.id == s.rule_id)
                .max_by_key(|r| r.version);
            let shown = s
                .pinned_version
                .and_then(|v| {
                    versions
                        .iter()
                        .find(|r| r.id == s.rule_id && r.version == v)
                })
                .or(latest);
            SubscriptionView {
                latest_version: latest.map(|r| r.version),
                rule: shown.cloned(),
                rule_id: s.rule_id,
                is_active: s.active,
                pinned_version: s.pinned_version,
            }
        })
        .collect();
    Ok((views, total))
}

/// Subscribes to a published rule, inactive.
pub async fn subscribe(
    store: &Store,
    rule_cache: &RuleCache,
    org: &OrgRecord,
    rule_id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    published(store, rule_id).await?;
    unit_of_work!(store, |tx| {
        Ok(tx.subscribe(&org.id, rule_id, now).await?)
    })?;
    invalidate(rule_cache, org, false);
    Ok(())
}

/// An editable organization rule made from a published one.
pub async fn clone(
    store: &Store,
    config: &Config,
    rule_cache: &RuleCache,
    caller: &Caller,
    org: &OrgRecord,
    (rule_id, name): (&str, Option<String>),
    now: DateTime<Utc>,
) -> ServiceResult<StoredRule> {
    let mut rule = published(store, rule_id).await?;
    rule.id = new_id();
    rule.version = 1;
    rule.scope = Scope::Org;
    rule.is_template = false;
    rule.conditions
        .iter_mut()
        .for_each(|c| c.depends_on_rule = None);
    if let Some(name) = name {
        rule.name = name;
    }
    check_rule(store, config, org, &rule).await?;
    let audit = [event(
        caller,
        "compliance.rule.create",
        &org.id,
        "rule",
        &rule.id,
        json!({"clonedFrom": rule_id}),
    )];
    unit_of_work!(store, |tx| {
        tx.create_rule(&org.id, &rule, &caller.user_id, now).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    invalidate(rule_cache, org, false);
    crate::services::rules::get(store, org, &rule.id, false).await
}

/// Subscribes to every published rule not yet subscribed, inactive: (added,
/// published).
pub async fn auto_subscribe(
    store: &Store,
    rule_cache: &RuleCache,
    org: &OrgRecord,
    now: DateTime<Utc>,
) -> ServiceResult<(u64, usize)> {
    let filter = RuleFilter {
        scope: Some("published".to_owned()),
        ..Default::default()
    };
    let (rules, _) = store.rules(None, &filter, u32::MAX, 0, true).await?;
    let ids: Vec<String> = rules.into_iter().map(|r| r.rule.id).collect();
    let added = unit_of_work!(store, |tx| {
        Ok(tx.subscribe_missing(&org.id, &ids, now).await?)
    })?;
    invalidate(rule_cache, org, false);
    Ok((added, ids.len()))
}

/// Activates or deactivates subscriptions (1 to 500), all or nothing.
pub async fn activate(
    store: &Store,
    rule_cache: &RuleCache,
    caller: &Caller,
    org: &OrgRecord,
    (rule_ids, active): (&[String], bool),
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    if rule_ids.is_empty() || rule_ids.len() > 500 {
        return Err(ServiceError::invalid("ruleIds", "must list 1 to 500 rules"));
    }
    let audit: Vec<_> = rule_ids
        .iter()
        .map(|rule_id| {
            event(
                caller,
                "compliance.rule.toggle",
                &org.id,
                "subscription",
                rule_id,
                json!({"isActive": active}),
            )
        })
        .collect();
    unit_of_work!(store, |tx| {
        tx.set_subscriptions_active(&org.id, rule_ids, active, now)
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    invalidate(rule_cache, org, false);
    Ok(())
}

/// Pins a subscription to the rule's current version (answered), or unpins it.
pub async fn pin(
    store: &Store,
    rule_cache: &RuleCache,
    org: &OrgRecord,
    rule_id: &str,
    pinned: bool,
    now: DateTime<Utc>,
) -> ServiceResult<Option<u32>> {
    let version = if pinned {
        Some(published(store, rule_id).await?.version)
    } else {
        None
    };
    unit_of_work!(store, |tx| {
        Ok(tx.pin_subscription(&org.id, rule_id, version, now).await?)
    })?;
    invalidate(rule_cache, org, false);
    Ok(version)
}

/// Unsubscribes.
pub async fn unsubscribe(
    store: &Store,
    rule_cache: &RuleCache,
    org: &OrgRecord,
    rule_id: &str,
) -> ServiceResult<()> {
    let now = Utc::now();
    unit_of_work!(store, |tx| {
        Ok(tx.unsubscribe(&org.id, rule_id, now).await?)
    })?;
    invalidate(rule_cache, org, false);
    Ok(())
}

/// The rule set of one rule, as a preview evaluates it (no dependencies).
fn single(config: &Config, mut rule: Rule) -> ServiceResult<RuleSet> {
    if rule.id.is_empty() {
        rule.id = "preview".to_owned();
    }
    rule.conditions
        .iter_mut()
        .for_each(|c| c.depends_on_rule = None);
    Ok(RuleSet::compile(
        [rule],
        &crate::compliance::compile_options(config, Dependencies::Strict),
    )?)
}

/// How many of the organization's validated entities (the last attributes of each)
/// would fail `rule`, with samples; evaluated on the CPU pool.
pub async fn impact(
    store: &Store,
    config: &Config,
    cpu: &CpuPool,
    org: &OrgRecord,
    rule: Rule,
) -> ServiceResult<Impact> {
    let target = rule.target;
    let set = single(config, rule)?;
    let snapshots = store
        .snapshots(&org.id, target.as_str(), IMPACT_SAMPLE_LIMIT)
        .await?;
    let evaluated = snapshots.len();
    let (failing, samples) = cpu
        .run(move || {
            let limits = AttributeLimits {
                max_depth: usize::MAX,
                max_keys: usize::MAX,
            };
            let mut failing = 0;
            let mut samples = Vec::new();
            for (entity, attributes) in &snapshots {
                let Ok(result) = compliance_core::judge(
                    Some(&set),
                    target,
                    attributes,
                    &limits,
                    &Waivers::none(),
                ) else {
                    continue;
                };
                if let Some(violation) = result.violations.into_iter().next() {
                    failing += 1;
                    if samples.len() < IMPACT_SAMPLES {
                        samples.push(json!({"entityId": entity, "violation": violation}));
                    }
                }
            }
            (failing, samples)
        })
        .await
        .map_err(|_| ServiceError::Unavailable)?;
    Ok(Impact {
        target,
        evaluated,
        failing,
        samples,
        source: "entities this service has validated (last attributes per entity); the plugin and pipeline inventories are not consulted yet",
    })
}

/// One rule against caller-supplied attributes, nothing saved; evaluated on the CPU
/// pool.
pub async fn preview(
    config: &Config,
    cpu: &CpuPool,
    rule: Rule,
    attributes: Value,
) -> ServiceResult<Evaluation> {
    let target = rule.target;
    let set = single(config, rule)?;
    let limits = config.attribute_limits();
    cpu.run(move || {
        compliance_core::judge(Some(&set), target, &attributes, &limits, &Waivers::none()).map_err(
            |e| match e {
                compliance_core::Error::AttributeLimitExceeded(limit) => ServiceError::Limit(limit),
                other => ServiceError::invalid("attributes", other.to_string()),
            },
        )
    })
    .await
    .map_err(|_| ServiceError::Unavailable)?
}
