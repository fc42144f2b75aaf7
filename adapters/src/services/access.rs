//! What the gate needs to decide (tenancy decides): the organization, the caller's
//! membership and Roles there or in its parent, the stored super-admin flag; and the
//! record of a denial. Loaded in as few queries as the requirement allows, and kept
//! per replica ([`FactsCache`]) until they change: a write of them bumps the store's
//! count of changes after its commit, and on PostgreSQL every other replica hears of
//! it through the triggers' notification, delivered at that commit. An authenticated
//! read whose facts are cached makes no query for the gate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tenancy::{Membership, Role};

use super::ServiceResult;
use crate::storage::{OrgRecord, Store};

/// The facts of one caller towards one organization.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The organization, if it exists.
    pub org: Option<OrgRecord>,
    /// The caller holds the stored super-admin flag.
    pub super_admin: bool,
    /// The caller's membership of it.
    pub membership: Option<Membership>,
    /// The caller's Roles there (loaded only when a permission is asked for).
    pub roles: Vec<Role>,
    /// The caller's membership of its parent, when not a member of it.
    pub parent_membership: Option<Membership>,
    /// The caller's Roles in the parent (only when a permission is asked for).
    pub parent_roles: Vec<Role>,
}

/// How long cached facts are used at most, a safety net: changes reach every
/// replica's cache through the store's count of changes well before.
pub const FACTS_TTL: Duration = Duration::from_secs(10);

/// How many (organization, user) pairs a replica keeps facts for; past it the
/// oldest half is dropped.
pub const FACTS_CAPACITY: usize = 20_000;

type FactsKey = (String, String, bool);

#[derive(Debug)]
struct CachedFacts {
    facts: Arc<Facts>,
    /// The store's count of changes when the load started.
    version: u64,
    loaded: Instant,
}

/// The gate's facts of existing organizations, per organization, user and whether
/// Roles were loaded. An entry loaded before the latest change is never used; an
/// unknown organization is never kept (a flood of made-up ids cannot push out the
/// real ones).
#[derive(Debug, Default)]
pub struct FactsCache {
    entries: Mutex<HashMap<FactsKey, CachedFacts>>,
}

impl FactsCache {
    fn get(&self, key: &FactsKey, version: u64) -> Option<Arc<Facts>> {
        let entries = self.entries.lock().ok()?;
        let hit = entries.get(key)?;
        (hit.version == version && hit.loaded.elapsed() < FACTS_TTL).then(|| hit.facts.clone())
    }

    fn put(&self, key: FactsKey, facts: Arc<Facts>, (version, loaded): (u64, Instant)) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= FACTS_CAPACITY {
            entries.retain(|_, e| e.version == version && e.loaded.elapsed() < FACTS_TTL);
            if entries.len() >= FACTS_CAPACITY {
                let mut ages: Vec<Instant> = entries.values().map(|e| e.loaded).collect();
                ages.sort_unstable();
                if let Some(median) = ages.get(ages.len() / 2).copied() {
                    entries.retain(|_, e| e.loaded > median);
                }
            }
        }
        entries.insert(
            key,
            CachedFacts {
                facts,
                version,
                loaded,
            },
        );
    }

    /// How many entries are kept (for tests and metrics).
    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The facts, from `cache` when nothing changed since they were loaded; Roles only
/// when `needs_roles` (membership-only routes, the most frequent reads, skip them).
pub async fn facts(
    store: &Store,
    cache: &FactsCache,
    org_id: &str,
    user_id: &str,
    needs_roles: bool,
) -> ServiceResult<Arc<Facts>> {
    let key = (org_id.to_owned(), user_id.to_owned(), needs_roles);
    // Read before the load: a change committed during it makes the entry stale.
    let version = store.facts_version();
    if let Some(hit) = cache.get(&key, version) {
        return Ok(hit);
    }
    let started = Instant::now();
    let facts = Arc::new(load(store, org_id, user_id, needs_roles).await?);
    if facts.org.is_some() {
        cache.put(key, facts.clone(), (version, started));
    }
    Ok(facts)
}

/// Loads the facts from the store.
async fn load(
    store: &Store,
    org_id: &str,
    user_id: &str,
    needs_roles: bool,
) -> ServiceResult<Facts> {
    let Some(snapshot) = store.access_snapshot(org_id, user_id).await? else {
        return Ok(Facts::default());
    };
    let membership = snapshot.membership.clone();
    let roles = match &membership {
        Some(m) if m.active && needs_roles => store.roles_of(org_id, user_id).await?,
        _ => Vec::new(),
    };
    let (parent_membership, parent_roles) = match &snapshot.org.parent_org_id {
        Some(parent) if membership.is_none() => {
            let m = store
                .membership(parent, user_id)
                .await?
                .map(|m| m.membership());
            let r = match &m {
                Some(m) if m.active && needs_roles => store.roles_of(parent, user_id).await?,
                _ => Vec::new(),
            };
            (m, r)
        }
        _ => (None, Vec::new()),
    };
    Ok(Facts {
        super_admin: snapshot.super_admin,
        org: Some(snapshot.org),
        membership,
        roles,
        parent_membership,
        parent_roles,
    })
}

/// Whether the user holds the stored super-admin flag.
pub async fn is_super_admin(store: &Store, user_id: &str) -> ServiceResult<bool> {
    Ok(store.is_super_admin(user_id).await?)
}

/// Records a denied state-changing request, folded per actor, organization and
/// minute (a flood of denials writes one event a minute).
pub async fn record_denial(
    store: &Store,
    event: &audit_chain::AuditEvent,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    Ok(store.fold_denial(event, now).await?)
}

/// Makes sure a user seen in a token exists (first sight in this process).
pub async fn first_sight(
    store: &Store,
    user_id: &str,
    email: Option<&str>,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    Ok(store.ensure_user(user_id, email, now).await?)
}
