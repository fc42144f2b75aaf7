//! A user's own feature flags (`PUT /api/admin/users/{id}/features`): from the
//! catalog `entitlements` fixes, a flag takes a tier feature away from the user or
//! opens a preview feature; it never opens a tier feature the organization lacks
//! (the crate decides). Kept per replica and followed on every replica within a
//! second (the trigger of migration 0026).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use serde_json::json;

use super::users::admin_events;
use crate::services::context::Caller;
use crate::services::{ServiceError, ServiceResult};
use crate::storage::unit_of_work;
use crate::storage::Store;

pub use crate::services::entitlement::{flags, require_user_feature};

/// Replaces a user's flags (by name) and answers them. An unknown name is 400 and
/// changes nothing. Audited `admin.user.features.update` with the old and the new
/// flags, in the system chain and in each organization the user belongs to.
pub async fn set(
    store: &Store,
    caller: &Caller,
    user_id: &str,
    wanted: &BTreeMap<String, bool>,
    now: DateTime<Utc>,
) -> ServiceResult<BTreeMap<String, bool>> {
    let checked = entitlements::check_user_flags(
        wanted
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect::<Vec<_>>()
            .iter(),
    )
    .map_err(|e| ServiceError::invalid("features", e.to_string()))?;
    store
        .account(user_id)
        .await?
        .filter(|a| a.deleted_at.is_none())
        .ok_or(ServiceError::NotFound("user".into()))?;
    let old: BTreeMap<String, bool> = store.user_features(user_id).await?.into_iter().collect();
    let new: BTreeMap<String, bool> = checked
        .iter()
        .map(|(flag, on)| (flag.name().to_owned(), *on))
        .collect();
    let memberships = store.user_memberships(user_id).await?;
    let audit = admin_events(
        store,
        caller,
        ("admin.user.features.update", user_id),
        &memberships,
        json!({"old": old, "new": new}),
    )
    .await?;
    let rows: Vec<(&str, bool)> = checked.iter().map(|(f, on)| (f.name(), *on)).collect();
    unit_of_work!(store, |tx| {
        tx.set_user_features(user_id, &rows, now).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(new)
}
