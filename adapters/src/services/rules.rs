//! An organization's rules: the checks a rule passes before it is stored, and the
//! caches its change makes stale on every replica.

use chrono::{DateTime, Utc};
use compliance_core::{Dependencies, RegexLimits, Rule, RuleSet, Scope};
use serde_json::{json, Value};

use super::{ServiceError, ServiceResult};
use crate::compliance::RuleCache;
use crate::config::Config;
use crate::services::context::{event, Caller};
use crate::storage::{new_id, unit_of_work, OrgRecord, Store};
pub use crate::storage::{RuleChange, RuleFilter, StoredRule};

/// A new rule of `org` (a new id, version 1), checked, stored with its first version
/// and audited; the caches it affects are dropped on every replica.
pub async fn create(
    store: &Store,
    config: &Config,
    rule_cache: &RuleCache,
    caller: &Caller,
    org: &OrgRecord,
    mut rule: Rule,
    now: DateTime<Utc>,
) -> ServiceResult<StoredRule> {
    rule.id = new_id();
    rule.version = 1;
    let details = json!({"name": rule.name, "scope": rule.scope});
    store_new(
        store,
        config,
        rule_cache,
        caller,
        org,
        &rule,
        ("compliance.rule.create", details),
        now,
    )
    .await
}

/// Checks and stores a rule `org` does not have yet, audited as `action` with
/// `details`, and drops the caches it affects.
pub(crate) async fn store_new(
    store: &Store,
    config: &Config,
    rule_cache: &RuleCache,
    caller: &Caller,
    org: &OrgRecord,
    rule: &Rule,
    (action, details): (&str, Value),
    now: DateTime<Utc>,
) -> ServiceResult<StoredRule> {
    check(store, config, org, rule).await?;
    let audit = [event(caller, action, &org.id, "rule", &rule.id, details)];
    unit_of_work!(store, |tx| {
        tx.create_rule(&org.id, rule, &caller.user_id, now).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    invalidate(rule_cache, org, rule.scope == Scope::Published);
    get(store, org, &rule.id, false).await
}

/// One rule of `org` (deleted ones included when `deleted`).
pub async fn get(
    store: &Store,
    org: &OrgRecord,
    id: &str,
    deleted: bool,
) -> ServiceResult<StoredRule> {
    store
        .rule(&org.id, id, deleted)
        .await?
        .ok_or(ServiceError::NotFound("rule".into()))
}

/// Every version of a rule, oldest first.
pub async fn history(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<Vec<RuleChange>> {
    let history = store.rule_history(&org.id, id).await?;
    if history.is_empty() {
        return Err(ServiceError::NotFound("rule".into()));
    }
    Ok(history)
}

/// Replaces rule `id`'s fields with `rule`'s; its version goes up by one, the change
/// (and which fields it touched) is recorded and audited.
pub async fn update(
    store: &Store,
    config: &Config,
    rule_cache: &RuleCache,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
    mut rule: Rule,
    now: DateTime<Utc>,
) -> ServiceResult<StoredRule> {
    let existing = get(store, org, id, false).await?;
    rule.id = id.to_owned();
    rule.version = existing.rule.version.saturating_add(1);
    check(store, config, org, &rule).await?;
    let fields = changed_fields(&existing.rule, &rule);
    let audit = [event(
        caller,
        "compliance.rule.update",
        &org.id,
        "rule",
        id,
        json!({"fields": fields, "version": rule.version}),
    )];
    let change = json!({"action": "update", "fields": fields});
    unit_of_work!(store, |tx| {
        tx.update_rule(
            (&org.id, &rule),
            existing.rule.target.as_str(),
            &change,
            &caller.user_id,
            now,
        )
        .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    let published = rule.scope == Scope::Published || existing.rule.scope == Scope::Published;
    invalidate(rule_cache, org, published);
    get(store, org, id, false).await
}

/// Soft-deletes rule `id`: it is no longer evaluated; the deletion is its last version.
pub async fn delete(
    store: &Store,
    rule_cache: &RuleCache,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let existing = get(store, org, id, false).await?;
    let mut rule = existing.rule;
    rule.version = rule.version.saturating_add(1);
    let audit = [event(
        caller,
        "compliance.rule.delete",
        &org.id,
        "rule",
        id,
        json!({"name": rule.name}),
    )];
    unit_of_work!(store, |tx| {
        tx.delete_rule(&org.id, &rule, &caller.user_id, now).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    invalidate(rule_cache, org, rule.scope == Scope::Published);
    Ok(())
}

/// The top-level fields of the rule that differ, `version` aside.
fn changed_fields(old: &Rule, new: &Rule) -> Vec<String> {
    let (Ok(Value::Object(old)), Ok(Value::Object(new))) =
        (serde_json::to_value(old), serde_json::to_value(new))
    else {
        return Vec::new();
    };
    let mut fields: Vec<String> = new
        .iter()
        .filter(|(k, v)| k.as_str() != "version" && old.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect();
    fields.sort();
    fields
}

/// Whether `rule` may be stored in `org`: valid on its own (compliance-core lists every
/// problem), of a scope and kind the organization may own, and compiling with the
/// organization's other rules (its dependencies resolved, no cycle).
pub async fn check(
    store: &Store,
    config: &Config,
    org: &OrgRecord,
    rule: &Rule,
) -> ServiceResult<()> {
    let regex = RegexLimits {
        max_length: config.compliance.max_regex_length,
        ..RegexLimits::default()
    };
    rule.validate(&regex)?;
    if rule.scope == Scope::Published && !org.is_system {
        return Err(ServiceError::Forbidden(
            "only the system organization may create published rules",
        ));
    }
    if rule.is_template && !org.is_system {
        return Err(ServiceError::Forbidden(
            "only the system organization owns template rules",
        ));
    }
    let mut set: Vec<Rule> = store
        .org_rules(&org.id)
        .await?
        .into_iter()
        .filter(|r| r.id != rule.id)
        .collect();
    set.push(rule.clone());
    RuleSet::compile(
        set,
        &crate::compliance::compile_options(config, Dependencies::Strict),
    )?;
    Ok(())
}

/// Forgets the cached sets a change of `org`'s rules can affect on this replica: its
/// own and its teams', or every organization's for a published rule or one of the
/// system organization's (the other replicas hear of it from the change's
/// transaction).
pub fn invalidate(rule_cache: &RuleCache, org: &OrgRecord, published: bool) {
    use crate::compliance::Stale;
    rule_cache.forget(&if published || org.is_system {
        Stale::All
    } else {
        Stale::Orgs(vec![org.id.clone()])
    });
}

/// A page of the organization's rules, filtered: (rules, total).
pub async fn list(
    store: &Store,
    org: &OrgRecord,
    filter: &crate::storage::RuleFilter,
    (limit, offset, ascending): (u32, u64, bool),
) -> ServiceResult<(Vec<StoredRule>, u64)> {
    Ok(store
        .rules(Some(&org.id), filter, limit, offset, ascending)
        .await?)
}
