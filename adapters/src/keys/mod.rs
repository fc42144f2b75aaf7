//! Secrets under each organization's own key (envelope encryption), below the
//! services: the sealed format ([`sealed`]), the key-encryption-key providers
//! ([`provider`]: the platform key, [`aws_kms`], [`vault`]) and this replica's cache of
//! unwrapped data keys ([`Keyring`]). It imports no service; the workflows that use
//! it are `services::keys`.

#[cfg(feature = "server")]
pub mod aws_kms;
pub mod provider;
pub mod sealed;
pub mod vault;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use provider::{FailureClass, KeyFailure, KeyProvider};
pub use sealed::{Binding, Key, SealError, Stored};

/// The longest an unwrapped data key is kept in memory.
pub const CACHE_FOR: Duration = Duration::from_secs(300);

/// The most organizations whose keys one replica keeps at once.
const MAX_CACHED: usize = 10_000;

/// The scope of the platform's own secrets (accounts' authenticators): its data key
/// is wrapped by the platform key only.
pub const PLATFORM_SCOPE: &str = "_platform";

/// What one organization's keys are now, as this replica last read them.
#[derive(Debug, Clone)]
pub struct OrgKeys {
    /// Its data keys, unwrapped, by version.
    pub keys: BTreeMap<u32, Key>,
    /// Whether its customer key is orphaned: nothing is sealed or opened.
    pub orphaned: bool,
}

impl OrgKeys {
    /// The newest data key and its version.
    pub fn current(&self) -> Option<(u32, &Key)> {
        self.keys.iter().next_back().map(|(v, k)| (*v, k))
    }
}

#[derive(Debug)]
struct Cached {
    /// The organization whose key-encryption key wraps them (its root).
    owner: String,
    keys: OrgKeys,
    loaded: Instant,
    generation: u64,
}

/// This replica's unwrapped data keys: each kept at most [`CACHE_FOR`], and dropped
/// at once when a key configuration or a data key changes (here, or on another
/// replica: `compliance_keys`).
#[derive(Debug)]
pub struct Keyring {
    cached: Mutex<HashMap<String, Cached>>,
    generation: AtomicU64,
    failed: tokio::sync::Notify,
    client: reqwest::Client,
}

impl Default for Keyring {
    fn default() -> Self {
        // A provider's answer is its own: a redirect elsewhere is not followed.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Keyring {
            cached: Mutex::default(),
            generation: AtomicU64::default(),
            failed: tokio::sync::Notify::default(),
            client,
        }
    }
}

impl Keyring {
    /// The client the key providers share (one connection pool).
    pub fn client(&self) -> reqwest::Client {
        self.client.clone()
    }

    /// The count of changes seen: read before loading, handed to [`Keyring::keep`].
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// An organization's keys, when kept and still fresh.
    pub fn get(&self, org_id: &str) -> Option<OrgKeys> {
        let generation = self.generation();
        let cached = self.cached.lock().ok()?;
        cached
            .get(org_id)
            .filter(|c| c.generation == generation && c.loaded.elapsed() < CACHE_FOR)
            .map(|c| c.keys.clone())
    }

    /// Keeps `keys` of `org_id`, whose key-encryption key is `owner`'s, loaded under
    /// `generation` (not kept when any change came since).
    pub fn keep(&self, org_id: &str, owner: &str, keys: OrgKeys, generation: u64) {
        if generation != self.generation() {
            return;
        }
        if let Ok(mut cached) = self.cached.lock() {
            if cached.len() >= MAX_CACHED {
                cached.retain(|_, c| c.loaded.elapsed() < CACHE_FOR && c.generation == generation);
                if cached.len() >= MAX_CACHED {
                    cached.clear();
                }
            }
            cached.insert(
                org_id.to_owned(),
                Cached {
                    owner: owner.to_owned(),
                    keys,
                    loaded: Instant::now(),
                    generation,
                },
            );
        }
    }

    /// `org_id`'s data keys or key configuration changed: its keys (and its teams',
    /// when it is a root) are not used again, nor any loaded before now.
    pub fn forget(&self, org_id: &str) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Ok(mut cached) = self.cached.lock() {
            cached.retain(|org, c| org != org_id && c.owner != org_id);
        }
    }

    /// Anything may have changed (a lost notification connection): nothing kept is
    /// used again.
    pub fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Ok(mut cached) = self.cached.lock() {
            cached.clear();
        }
    }

    /// An unwrap failed: the checker looks at the keys now.
    pub fn unwrap_failed(&self) {
        self.failed.notify_one();
    }

    /// Resolves when an unwrap fails (for the checker).
    pub async fn failure(&self) {
        self.failed.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::provider::Local;
    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Secrets sealed under several data-key versions, across new versions and
        /// rotations of the key-encryption key (each rewraps every version, never a
        /// secret): every one still opens, where it was sealed only.
        #[test]
        fn every_version_stays_readable_after_rotations(ops in prop::collection::vec(0u8..3, 1..24)) {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            runtime.block_on(async {
                let org = "org-a";
                let mut kek = Local::new(Key::generate().unwrap());
                let mut rows: Vec<(u32, String)> = Vec::new();
                let mut sealed_values: Vec<(String, String, String)> = Vec::new();
                for (i, op) in ops.iter().enumerate() {
                    match op {
                        // A new data-key version.
                        1 => {
                            let key = Key::generate().unwrap();
                            let version = u32::try_from(rows.len()).unwrap() + 1;
                            rows.push((version, kek.wrap(org, &key).await.unwrap()));
                        }
                        // A new key-encryption key: every version rewrapped.
                        2 => {
                            let next = Local::new(Key::generate().unwrap());
                            for row in &mut rows {
                                let key = kek.unwrap(org, &row.1).await.unwrap();
                                row.1 = next.wrap(org, &key).await.unwrap();
                            }
                            kek = next;
                        }
                        // A secret sealed under the newest version.
                        _ => {
                            if rows.is_empty() {
                                let key = Key::generate().unwrap();
                                rows.push((1, kek.wrap(org, &key).await.unwrap()));
                            }
                            let (version, wrapped) = rows.last().cloned().unwrap();
                            let key = kek.unwrap(org, &wrapped).await.unwrap();
                            let row = format!("row-{i}");
                            let plain = format!("secret-{i}");
                            let binding = Binding { org_id: org, table: "t", column: "c", row_id: &row };
                            let stored = sealed::seal(&key, version, &binding, &plain).unwrap();
                            sealed_values.push((row, plain, stored));
                        }
                    }
                }
                let mut keys = BTreeMap::new();
                for (version, wrapped) in &rows {
                    keys.insert(*version, kek.unwrap(org, wrapped).await.unwrap());
                }
                for (row, plain, stored) in &sealed_values {
                    let Ok(Stored::Sealed { version, body }) = Stored::parse(stored) else {
                        panic!("{stored}")
                    };
                    let key = keys.get(&version).unwrap();
                    let here = Binding { org_id: org, table: "t", column: "c", row_id: row };
                    assert_eq!(&sealed::open(key, &here, body).unwrap(), plain);
                    let elsewhere = Binding { row_id: "another-row", ..here };
                    assert!(sealed::open(key, &elsewhere, body).is_err());
                }
            });
        }
    }

    #[test]
    fn kept_keys_are_dropped_by_any_change() {
        let ring = Keyring::default();
        let keys = OrgKeys {
            keys: BTreeMap::from([(1, Key::generate().unwrap()), (2, Key::generate().unwrap())]),
            orphaned: false,
        };
        assert_eq!(keys.current().map(|(v, _)| v), Some(2));
        let generation = ring.generation();
        ring.keep("a", "a", keys.clone(), generation);
        ring.keep("team", "a", keys.clone(), generation);
        ring.keep("b", "b", keys.clone(), generation);
        assert!(ring.get("a").is_some());
        // A change of a root's keys drops its teams' too, and no other's.
        ring.forget("a");
        assert!(ring.get("a").is_none() && ring.get("team").is_none());
        assert!(ring.get("b").is_none(), "kept under an older generation");
        let generation = ring.generation();
        ring.keep("b", "b", keys.clone(), generation);
        ring.forget("c");
        ring.keep("c", "c", keys.clone(), generation);
        assert!(ring.get("c").is_none(), "loaded before a change: not kept");
        ring.changed();
        assert!(ring.get("b").is_none());
    }
}
