//! Facts kept per replica until they change: what the gate and every check read on
//! each request (the organization, memberships, Roles, the super-admin flag; the
//! notification preference; an entity's approved exemptions). Each write of those
//! facts bumps the store's count of changes after its commit
//! ([`Store::facts_changed`]), and on PostgreSQL every other replica hears of it from
//! the change's own transaction (the triggers of migration 0015 notify on
//! [`crate::storage::FACTS_CHANNEL`]). A kept value loaded under an older count is
//! never used, so a value whose load began before a change is not served after it.
//! A TTL stays as a safety net; the number of keys is bounded.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tenancy::{Membership, Role};

use crate::storage::{NotificationPreference, OrgRecord, Store, StoreError};

/// How long a kept value is used at most.
pub const TTL: Duration = Duration::from_secs(10);

/// How many keys each cache keeps; past it the oldest half goes.
pub const CAPACITY: usize = 20_000;

#[derive(Debug)]
struct Entry<V> {
    value: Arc<V>,
    /// The store's count of changes when the load started.
    version: u64,
    loaded: Instant,
}

/// Values by key, each with the count of changes it was loaded under.
#[derive(Debug)]
pub struct Kept<K, V> {
    entries: Mutex<HashMap<K, Entry<V>>>,
}

impl<K, V> Default for Kept<K, V> {
    fn default() -> Self {
        Kept {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq + Clone, V> Kept<K, V> {
    fn get(&self, key: &K, version: u64) -> Option<Arc<V>> {
        let entries = self.entries.lock().ok()?;
        let hit = entries.get(key)?;
        (hit.version == version && hit.loaded.elapsed() < TTL).then(|| hit.value.clone())
    }

    fn put(&self, key: K, value: Arc<V>, (version, loaded): (u64, Instant)) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= CAPACITY {
            entries.retain(|_, e| e.version == version && e.loaded.elapsed() < TTL);
            if entries.len() >= CAPACITY {
                let mut ages: Vec<Instant> = entries.values().map(|e| e.loaded).collect();
                ages.sort_unstable();
                if let Some(median) = ages.get(ages.len() / 2).copied() {
                    entries.retain(|_, e| e.loaded > median);
                }
            }
        }
        entries.insert(
            key,
            Entry {
                value,
                version,
                loaded,
            },
        );
    }

    /// The value of `key`: kept, or loaded by `load` and kept when `keep` says so.
    pub async fn get_or_load<E, F>(
        &self,
        store: &Store,
        key: K,
        keep: impl FnOnce(&V) -> bool,
        load: F,
    ) -> Result<Arc<V>, E>
    where
        F: std::future::Future<Output = Result<V, E>>,
    {
        // Read before the load: a change committed during it makes the value stale.
        let version = store.facts_version();
        if let Some(hit) = self.get(&key, version) {
            return Ok(hit);
        }
        let started = Instant::now();
        let value = Arc::new(load.await?);
        if keep(&value) {
            self.put(key, value.clone(), (version, started));
        }
        Ok(value)
    }

    /// How many keys are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }
}

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

/// Every kept fact of one replica.
#[derive(Debug, Default)]
pub struct KeptFacts {
    /// The gate's facts per (organization, user, with Roles).
    pub gate: Kept<(String, String, bool), Facts>,
    /// Notification preferences per organization.
    pub preferences: Kept<String, NotificationPreference>,
    /// Approved exemptions per (organization, entity).
    pub exemptions: Kept<(String, String), Vec<compliance_core::Exemption>>,
    /// Whether an organization has any approved exemption at all (a scan of one that
    /// has none asks for no page's exemptions).
    pub exempting: Kept<String, bool>,
    /// What sessions stand on, per (user, sign-in family).
    pub sessions: Kept<(String, Option<String>), crate::storage::SessionStanding>,
    /// Single sign-on's enforcement and break-glass accounts per root organization.
    pub sso: Kept<String, crate::storage::SsoPolicyRow>,
    /// Impersonations by id (found or not).
    pub impersonations: Kept<String, Option<crate::storage::ImpersonationRow>>,
    /// A user's own feature flags, checked against the catalog.
    pub user_flags: Kept<String, entitlements::UserFlags>,
    /// Personal access tokens by the hash of their secret (found ones only).
    pub tokens: Kept<String, Option<crate::storage::PersonalTokenRecord>>,
    /// When each personal access token's use was last written by this replica.
    token_uses: Mutex<HashMap<String, Instant>>,
}

impl KeptFacts {
    /// Whether a use of token `id` is worth writing (none written by this replica
    /// in the last `every`); if so it counts as written now. Bounded like the
    /// caches.
    pub fn token_used(&self, id: &str, every: Duration) -> bool {
        let Ok(mut uses) = self.token_uses.lock() else {
            return false;
        };
        if uses.get(id).is_some_and(|at| at.elapsed() < every) {
            return false;
        }
        if uses.len() >= CAPACITY {
            uses.retain(|_, at| at.elapsed() < every);
            if uses.len() >= CAPACITY {
                uses.clear();
            }
        }
        uses.insert(id.to_owned(), Instant::now());
        true
    }
}

/// An organization's notification preference, kept.
pub async fn preference(
    store: &Store,
    kept: &KeptFacts,
    org_id: &str,
) -> Result<Arc<NotificationPreference>, StoreError> {
    kept.preferences
        .get_or_load(
            store,
            org_id.to_owned(),
            |_| true,
            store.notification_preference(org_id),
        )
        .await
}

/// An entity's approved exemptions (their expiry is checked by the caller), kept.
pub async fn approved_exemptions(
    store: &Store,
    kept: &KeptFacts,
    org_id: &str,
    entity_id: &str,
) -> Result<Arc<Vec<compliance_core::Exemption>>, StoreError> {
    kept.exemptions
        .get_or_load(
            store,
            (org_id.to_owned(), entity_id.to_owned()),
            |_| true,
            store.approved_exemptions(org_id, entity_id),
        )
        .await
}

/// Whether the organization has any approved exemption, kept.
pub async fn any_approved_exemption(
    store: &Store,
    kept: &KeptFacts,
    org_id: &str,
) -> Result<bool, StoreError> {
    Ok(*kept
        .exempting
        .get_or_load(
            store,
            org_id.to_owned(),
            |_| true,
            store.any_approved_exemption(org_id),
        )
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_loaded_before_a_change_is_not_used_after_it() {
        let kept: Kept<&str, u32> = Kept::default();
        kept.put("acme", Arc::new(1), (7, Instant::now()));
        assert_eq!(kept.get(&"acme", 7).as_deref(), Some(&1));
        assert_eq!(kept.get(&"acme", 8), None);
    }

    #[test]
    fn the_keys_are_bounded() {
        let kept: Kept<usize, ()> = Kept::default();
        for key in 0..CAPACITY + 10 {
            kept.put(key, Arc::new(()), (1, Instant::now()));
        }
        assert!(kept.len() <= CAPACITY);
        assert!(kept.get(&(CAPACITY + 9), 1).is_some(), "the newest stay");
    }
}
