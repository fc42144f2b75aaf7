//! An organization's rules: the checks a rule passes before it is stored, and the
//! caches its change makes stale on every replica.

use compliance_core::{Dependencies, RegexLimits, Rule, RuleSet, Scope};

use super::{ServiceError, ServiceResult};
use crate::http::state::AppState;
use crate::storage::OrgRecord;

/// Whether `rule` may be stored in `org`: valid on its own (compliance-core lists every
/// problem), of a scope and kind the organization may own, and compiling with the
/// organization's other rules (its dependencies resolved, no cycle).
pub async fn check(state: &AppState, org: &OrgRecord, rule: &Rule) -> ServiceResult<()> {
    let regex = RegexLimits {
        max_length: state.config.compliance.max_regex_length,
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
    let mut set: Vec<Rule> = state
        .store
        .org_rules(&org.id)
        .await?
        .into_iter()
        .filter(|r| r.id != rule.id)
        .collect();
    set.push(rule.clone());
    RuleSet::compile(
        set,
        &crate::compliance::compile_options(&state.config, Dependencies::Strict),
    )?;
    Ok(())
}

/// Forgets the cached sets a change of `org`'s rules can affect: its own and its
/// teams', or every organization's for a published rule or one of the system
/// organization's (the other replicas are told through the store).
pub async fn invalidate(state: &AppState, org: &OrgRecord, published: bool) -> ServiceResult<()> {
    use crate::compliance::{forget, Stale};
    if published || org.is_system {
        forget(&state.store, &state.rule_cache, Stale::All).await;
        return Ok(());
    }
    let (teams, _) = state.store.teams(&org.id, u32::MAX, 0, true).await?;
    let mut ids: Vec<String> = teams.into_iter().map(|t| t.id).collect();
    ids.push(org.id.clone());
    forget(&state.store, &state.rule_cache, Stale::Orgs(ids)).await;
    Ok(())
}
