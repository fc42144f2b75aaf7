//! One running generation's place among its organization's, shared by every replica:
//! taken, renewed while it runs, given back when dropped.

use super::*;

/// How long a generation's place is held without renewal (a replica that dies
/// gives its places back after this), and how often a running one renews it.
pub(super) const PLACE_LEASE: std::time::Duration = std::time::Duration::from_secs(60);
pub(super) const PLACE_RENEWAL: std::time::Duration = std::time::Duration::from_secs(20);

/// One running generation's place among its organization's, shared by every
/// replica (`AI_GENERATIONS_PER_ORG` in all): its lease is renewed while it runs,
/// and it is given back when dropped.
#[derive(Debug)]
pub(super) struct Place {
    id: String,
    store: crate::storage::Store,
    renewal: tokio::task::JoinHandle<()>,
}

impl Place {
    /// A place for one more generation of `org_id`, unless `limit` run already on
    /// any replica.
    pub(super) async fn take(
        store: &crate::storage::Store,
        org_id: &str,
        limit: usize,
    ) -> ServiceResult<Option<Place>> {
        let id = crate::new_id();
        let now = Utc::now();
        let taken = crate::storage::unit_of_work!(store, |tx| {
            Ok(tx
                .take_ai_place((&id, org_id), limit as u64, now, now + lease())
                .await?)
        })?;
        if !taken {
            return Ok(None);
        }
        let renewal = {
            let store = store.clone();
            let id = id.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(PLACE_RENEWAL).await;
                    if let Err(error) = store.renew_ai_place(&id, Utc::now() + lease()).await {
                        tracing::warn!(%error, "a generation's place could not be renewed");
                    }
                }
            })
        };
        Ok(Some(Place {
            id,
            store: store.clone(),
            renewal,
        }))
    }
}

pub(super) fn lease() -> chrono::Duration {
    chrono::Duration::from_std(PLACE_LEASE).unwrap_or_else(|_| chrono::Duration::seconds(60))
}

impl Drop for Place {
    fn drop(&mut self) {
        self.renewal.abort();
        let store = self.store.clone();
        let id = std::mem::take(&mut self.id);
        // Given back at once where a runtime runs; else its lease runs out.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = store.release_ai_place(&id).await {
                    tracing::warn!(%error, "a generation's place could not be given back; its lease runs out");
                }
            });
        }
    }
}
