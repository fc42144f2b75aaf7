//! Templates: the system organization's template rules and policies, and their
//! instances in an organization.

use chrono::{DateTime, Utc};
use compliance_core::{Rule, Scope};
use serde_json::json;

use super::rules::{check, invalidate, store_new};
use super::{ServiceError, ServiceResult};
use crate::compliance::RuleCache;
use crate::config::Config;
use crate::services::context::{event, Caller};
use crate::storage::{
    new_id, unit_of_work, OrgRecord, PolicyRecord, RuleFilter, Store, StoredRule,
};

/// The catalog of templates: (rules, policies); empty before a system organization
/// exists.
pub async fn catalog(store: &Store) -> ServiceResult<(Vec<StoredRule>, Vec<PolicyRecord>)> {
    // The system organization is unique, so the catalog needs no configuration.
    let Some(system) = store.system_organization().await? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let filter = RuleFilter {
        is_template: Some(true),
        ..Default::default()
    };
    let (rules, _) = store
        .rules(Some(&system.id), &filter, u32::MAX, 0, true)
        .await?;
    let (policies, _) = store
        .policies(&system.id, None, Some(true), u32::MAX, 0)
        .await?;
    Ok((rules, policies))
}

async fn system(store: &Store) -> ServiceResult<OrgRecord> {
    store
        .system_organization()
        .await?
        .ok_or(ServiceError::NotFound("template".into()))
}

/// The org rule a template rule becomes: a new id, version 1, no dependency. Nothing
/// is checked or written.
async fn instance(
    store: &Store,
    system: &OrgRecord,
    template_id: &str,
    name: Option<String>,
) -> ServiceResult<Rule> {
    let template = store
        .rule(&system.id, template_id, false)
        .await?
        .filter(|r| r.rule.is_template)
        .ok_or(ServiceError::NotFound("template".into()))?;
    let mut rule = template.rule;
    rule.id = new_id();
    rule.version = 1;
    rule.is_template = false;
    rule.scope = Scope::Org;
    rule.conditions
        .iter_mut()
        .for_each(|c| c.depends_on_rule = None);
    if let Some(name) = name {
        rule.name = name;
    }
    Ok(rule)
}

/// Template rule `template_id` instantiated as a rule of `org` (named `name`, or as the
/// template), audited `compliance.template.apply`.
pub async fn apply(
    store: &Store,
    config: &Config,
    rule_cache: &RuleCache,
    caller: &Caller,
    org: &OrgRecord,
    template_id: &str,
    name: Option<String>,
    now: DateTime<Utc>,
) -> ServiceResult<StoredRule> {
    let system = system(store).await?;
    let rule = instance(store, &system, template_id, name).await?;
    let details = json!({"templateId": template_id});
    store_new(
        store,
        config,
        rule_cache,
        caller,
        org,
        &rule,
        ("compliance.template.apply", details),
        now,
    )
    .await
}

/// Template policy `template_id` copied into `org` with the template rules it groups,
/// each instantiated as an org rule: all or nothing, in one transaction. A rule name
/// already taken in the organization is a conflict, found before anything is written.
pub async fn clone_policy(
    store: &Store,
    config: &Config,
    rule_cache: &RuleCache,
    caller: &Caller,
    org: &OrgRecord,
    template_id: &str,
    name: Option<String>,
    now: DateTime<Utc>,
) -> ServiceResult<PolicyRecord> {
    let system = system(store).await?;
    let template = store
        .policy(&system.id, template_id)
        .await?
        .filter(|p| p.is_template)
        .ok_or(ServiceError::NotFound("template".into()))?;
    let existing: Vec<String> = store
        .org_rules(&org.id)
        .await?
        .into_iter()
        .map(|r| r.name.to_lowercase())
        .collect();
    let mut rules = Vec::with_capacity(template.rule_ids.len());
    for rule_id in &template.rule_ids {
        let rule = instance(store, &system, rule_id, None)
            .await
            .map_err(|e| match e {
                ServiceError::NotFound(_) => ServiceError::NotFound("template rule".into()),
                other => other,
            })?;
        check(store, config, org, &rule).await?;
        if existing.contains(&rule.name.to_lowercase()) {
            return Err(ServiceError::Conflict(format!(
                "a rule named `{}` already exists",
                rule.name
            )));
        }
        rules.push(rule);
    }
    let name = name.unwrap_or(template.name);
    let rule_ids: Vec<String> = rules.iter().map(|r| r.id.clone()).collect();
    let policy_id = new_id();
    let policy_audit = [event(
        caller,
        "compliance.template.apply",
        &org.id,
        "policy",
        &policy_id,
        json!({"templateId": template_id}),
    )];
    let policy = unit_of_work!(store, |tx| {
        for (template_rule, rule) in template.rule_ids.iter().zip(&rules) {
            let audit = [event(
                caller,
                "compliance.template.apply",
                &org.id,
                "rule",
                &rule.id,
                json!({"templateId": template_rule}),
            )];
            tx.create_rule(&org.id, rule, &caller.user_id, now).await?;
            tx.enqueue_audit(&audit).await?;
        }
        tx.insert_policy(
            (&policy_id, &org.id),
            (&name, template.description.as_deref()),
            &rule_ids,
            false,
            now,
        )
        .await?;
        tx.enqueue_audit(&policy_audit).await?;
        tx.policy(&org.id, &policy_id)
            .await?
            .ok_or(ServiceError::NotFound("policy".into()))
    })?;
    invalidate(rule_cache, org, false);
    Ok(policy)
}
