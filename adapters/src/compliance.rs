//! The compliance service: effective rule sets (compiled, cached per organization and
//! target).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use compliance_core::{
    effective_rules, CompileOptions, Dependencies, OrganizationKind, RegexLimits, RuleSet,
    RuleSources, Target,
};

use crate::config::Config;
use crate::storage::{OrgRecord, Store};

/// A compiled set, when it was built, and the organization it was built for.
type Entry = (Arc<RuleSet>, Instant, Arc<OrgRecord>);

/// Compiled effective rule sets per (organization, target), with the organization
/// record they were built for (so that a warm validation by a service reads nothing), for
/// `CACHE_TTL_COMPLIANCE_RULES`. Every rule or subscription change invalidates the
/// organizations it can affect. The cache lives in the process: another replica sees
/// a change when its own entry expires.
#[derive(Debug, Default)]
pub struct RuleCache {
    entries: Mutex<HashMap<(String, Target), Entry>>,
}

impl RuleCache {
    /// A fresh entry: the organization as it was loaded, and its compiled set.
    pub fn get(
        &self,
        org_id: &str,
        target: Target,
        ttl: Duration,
    ) -> Option<(Arc<OrgRecord>, Arc<RuleSet>)> {
        let entries = self.entries.lock().ok()?;
        entries
            .get(&(org_id.to_owned(), target))
            .filter(|(_, at, _)| at.elapsed() < ttl)
            .map(|(set, _, org)| (org.clone(), set.clone()))
    }

    fn put(&self, org: &OrgRecord, target: Target, set: Arc<RuleSet>) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.insert(
                (org.id.clone(), target),
                (set, Instant::now(), Arc::new(org.clone())),
            );
        }
    }

    /// Forgets an organization's sets and those of its teams (propagated rules).
    pub fn invalidate(&self, org_ids: &[String]) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|(org, _), _| !org_ids.contains(org));
        }
    }

    /// Forgets everything (a published rule changed: any subscriber may be affected).
    pub fn invalidate_all(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.clear();
        }
    }
}

/// What a change makes stale in the rule caches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// The sets of these organizations.
    Orgs(Vec<String>),
    /// Every set (a published rule changed: any subscriber may be affected).
    All,
}

/// The channel on which replicas tell each other what went stale (PostgreSQL).
pub const CACHE_CHANNEL: &str = "compliance_rule_cache";

impl Stale {
    /// The notification payload: `*`, or the organization ids as a JSON array (`*`
    /// when that would not fit PostgreSQL's 8000-byte payload).
    pub fn payload(&self) -> String {
        match self {
            Stale::All => "*".to_owned(),
            Stale::Orgs(ids) => {
                let text = serde_json::to_string(ids).unwrap_or_else(|_| "*".to_owned());
                if text.len() > 7000 {
                    "*".to_owned()
                } else {
                    text
                }
            }
        }
    }

    /// Reads a payload; anything unreadable means everything is stale.
    pub fn from_payload(payload: &str) -> Stale {
        serde_json::from_str::<Vec<String>>(payload).map_or(Stale::All, Stale::Orgs)
    }
}

impl RuleCache {
    /// Forgets what `stale` names.
    pub fn forget(&self, stale: &Stale) {
        match stale {
            Stale::All => self.invalidate_all(),
            Stale::Orgs(ids) => self.invalidate(ids),
        }
    }
}

/// Forgets what a change made stale, here and (on PostgreSQL) on every other replica,
/// which drop it when the notification arrives; the cache's TTL stays as a safety net.
pub async fn forget(store: &Store, cache: &RuleCache, stale: Stale) {
    cache.forget(&stale);
    if let Err(error) = store.notify(CACHE_CHANNEL, &stale.payload()).await {
        tracing::warn!(%error, "other replicas were not told of a rule change; their caches expire with the TTL");
    }
}

/// The compile options the configuration sets.
pub fn compile_options(config: &Config, dependencies: Dependencies) -> CompileOptions {
    CompileOptions {
        regex: RegexLimits {
            max_length: config.compliance.max_regex_length,
            ..RegexLimits::default()
        },
        dependencies,
    }
}

/// The organization's kind for the effective set.
pub fn kind(org: &OrgRecord) -> OrganizationKind {
    if org.is_system {
        OrganizationKind::System
    } else if org.parent_org_id.is_some() {
        OrganizationKind::Team
    } else {
        OrganizationKind::Root
    }
}

/// The effective rules of an organization (SEMANTICS.md 1.6), loaded from storage.
pub async fn effective(
    store: &Store,
    org: &OrgRecord,
) -> Result<Vec<compliance_core::Rule>, crate::storage::StoreError> {
    if org.is_system {
        return Ok(Vec::new());
    }
    let own = store.org_rules(&org.id).await?;
    let subscriptions = store.subscriptions(&org.id).await?;
    let active: Vec<String> = subscriptions
        .iter()
        .filter(|s| s.active)
        .map(|s| s.rule_id.clone())
        .collect();
    let published = store.published_versions(&active).await?;
    let parent = match &org.parent_org_id {
        Some(parent) => store.org_rules(parent).await?,
        None => Vec::new(),
    };
    Ok(effective_rules(&RuleSources {
        organization: kind(org),
        own_rules: &own,
        subscriptions: &subscriptions,
        published_versions: &published,
        parent_rules: &parent,
    }))
}

/// The compiled effective set of an organization for a target, from the cache or
/// loaded and compiled (leniently: a merged set skips conditions it cannot honour).
pub async fn rule_set(
    store: &Store,
    cache: &RuleCache,
    config: &Config,
    org: &OrgRecord,
    target: Target,
) -> Result<Arc<RuleSet>, crate::storage::StoreError> {
    if let Some((_, set)) = cache.get(&org.id, target, config.compliance.cache_ttl) {
        return Ok(set);
    }
    let rules: Vec<_> = effective(store, org)
        .await?
        .into_iter()
        .filter(|r| r.target == target)
        .collect();
    let set =
        RuleSet::compile(rules, &compile_options(config, Dependencies::Lenient)).map_err(|e| {
            // Stored rules that do not compile are stored data that does not decode.
            crate::storage::StoreError::Corrupt(format!(
                "stored rules of {} do not compile: {e}",
                org.id
            ))
        })?;
    let set = Arc::new(set);
    cache.put(org, target, set.clone());
    Ok(set)
}
