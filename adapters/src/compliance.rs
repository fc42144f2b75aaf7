//! The compliance service: effective rule sets (compiled, cached per organization and
//! target).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
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
/// organizations it can affect, here after its commit and, on PostgreSQL, on every
/// replica through the notification its transaction sends (migration 0015's triggers,
/// on [`CACHE_CHANNEL`]). A set whose load began before an invalidation is not kept.
#[derive(Debug, Default)]
pub struct RuleCache {
    entries: Mutex<HashMap<(String, Target), Entry>>,
    /// How many invalidations happened: a load that saw another count at its start
    /// may hold rules from before the change.
    invalidations: AtomicU64,
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

    /// The count of invalidations, read before a load.
    pub fn version(&self) -> u64 {
        self.invalidations.load(Ordering::Acquire)
    }

    /// Keeps a set loaded since `version` was read, unless an invalidation happened
    /// meanwhile (checked under the entries' lock, which invalidations take too).
    fn put(&self, org: &OrgRecord, target: Target, set: Arc<RuleSet>, version: u64) {
        if let Ok(mut entries) = self.entries.lock() {
            if self.version() != version {
                return;
            }
            entries.insert(
                (org.id.clone(), target),
                (set, Instant::now(), Arc::new(org.clone())),
            );
        }
    }

    /// Forgets the sets of these organizations and of their teams (which take their
    /// root's propagated rules).
    pub fn invalidate(&self, org_ids: &[String]) {
        if let Ok(mut entries) = self.entries.lock() {
            self.invalidations.fetch_add(1, Ordering::AcqRel);
            entries.retain(|(org, _), (_, _, record)| {
                !org_ids.contains(org)
                    && !record
                        .parent_org_id
                        .as_ref()
                        .is_some_and(|parent| org_ids.contains(parent))
            });
        }
    }

    /// Forgets everything (a published rule changed: any subscriber may be affected).
    pub fn invalidate_all(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            self.invalidations.fetch_add(1, Ordering::AcqRel);
            entries.clear();
        }
    }
}

/// What a change makes stale in the rule caches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// The sets of these organizations (and of their teams).
    Orgs(Vec<String>),
    /// Every set (a published rule changed: any subscriber may be affected).
    All,
}

/// The channel on which replicas hear what went stale (PostgreSQL); the triggers of
/// migration 0015 send on it.
pub const CACHE_CHANNEL: &str = "compliance_rule_cache";

impl Stale {
    /// Reads a notification's payload (`*`, or the organization ids as a JSON
    /// array); anything unreadable means everything is stale.
    pub fn from_payload(payload: &str) -> Stale {
        serde_json::from_str::<Vec<String>>(payload).map_or(Stale::All, Stale::Orgs)
    }
}

impl RuleCache {
    /// Forgets what `stale` names, on this replica: a change's own replica calls it
    /// after the commit (the others hear of it from the change's transaction).
    pub fn forget(&self, stale: &Stale) {
        match stale {
            Stale::All => self.invalidate_all(),
            Stale::Orgs(ids) => self.invalidate(ids),
        }
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
    let version = cache.version();
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
    cache.put(org, target, set.clone(), version);
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn org(id: &str, parent: Option<&str>) -> OrgRecord {
        OrgRecord {
            id: id.to_owned(),
            name: id.to_owned(),
            display_name: None,
            parent_org_id: parent.map(str::to_owned),
            tier: entitlements::Tier::Developer,
            is_system: false,
            owner_id: "owner".to_owned(),
            created_at: chrono::DateTime::UNIX_EPOCH,
            updated_at: chrono::DateTime::UNIX_EPOCH,
        }
    }

    fn empty() -> Arc<RuleSet> {
        Arc::new(
            RuleSet::compile(Vec::new(), &CompileOptions::default())
                .expect("an empty set compiles"),
        )
    }

    const TTL: Duration = Duration::from_secs(60);

    #[test]
    fn a_set_loaded_across_an_invalidation_is_not_kept() {
        let cache = RuleCache::default();
        let before = cache.version();
        cache.invalidate(&["acme".to_owned()]);
        cache.put(&org("acme", None), Target::Plugin, empty(), before);
        assert!(cache.get("acme", Target::Plugin, TTL).is_none());
        cache.put(&org("acme", None), Target::Plugin, empty(), cache.version());
        assert!(cache.get("acme", Target::Plugin, TTL).is_some());
    }

    #[test]
    fn a_root_s_invalidation_takes_its_teams_and_no_other() {
        let cache = RuleCache::default();
        for record in [
            org("acme", None),
            org("acme-team", Some("acme")),
            org("globex", None),
        ] {
            cache.put(&record, Target::Plugin, empty(), cache.version());
        }
        cache.forget(&Stale::from_payload(r#"["acme"]"#));
        assert!(cache.get("acme", Target::Plugin, TTL).is_none());
        assert!(cache.get("acme-team", Target::Plugin, TTL).is_none());
        assert!(cache.get("globex", Target::Plugin, TTL).is_some());
        cache.forget(&Stale::from_payload("*"));
        assert!(cache.get("globex", Target::Plugin, TTL).is_none());
    }
}
