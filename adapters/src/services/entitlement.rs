//! An account's effective entitlement, in one place: the root's tier, its billing
//! subscription's add-ons, a system admin's overrides and granted features, computed
//! by the entitlements crate; and every change of them committed with its
//! synchronization (limits to the pool rows, seats and features to the organization)
//! in one transaction, conditional on the subscription's version.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use entitlements::{
    Account, AppliedBundle, BundleId, Dimension, Entitlement, Feature, Limit, Tier, UserFlags,
};

use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::replica::allowance::Allowances;
use crate::replica::kept::KeptFacts;
use crate::services::context::{event_on, Caller};
use crate::storage::{
    new_id, unit_of_work, Charged, EntitlementWrite, LimitSync, OrgRecord, Store,
    SubscriptionRecord,
};

/// How many times a change is computed again when another one committed meanwhile.
const ATTEMPTS: usize = 8;

/// An account as stored: its root, subscription, overrides and granted features.
#[derive(Debug, Clone)]
pub struct Current {
    /// The account root.
    pub root: OrgRecord,
    /// Its billing subscription.
    pub subscription: SubscriptionRecord,
    /// Tier, bundles, provider, as the entitlements crate sees them.
    pub account: Account,
    /// A system admin's limits.
    pub overrides: BTreeMap<Dimension, Limit>,
    /// Features granted beside the add-ons.
    pub granted: BTreeSet<Feature>,
}

/// What a change does to an account (all `None`/empty: a plain synchronization).
#[derive(Debug, Clone, Default)]
pub struct Change {
    /// The bundles after the change.
    pub bundles: Option<Vec<AppliedBundle>>,
    /// The new tier.
    pub tier: Option<Tier>,
    /// Overrides to set (`Some`) or clear (`None`).
    pub overrides: Vec<(Dimension, Option<Limit>)>,
    /// The granted features after the change.
    pub granted: Option<BTreeSet<Feature>>,
    /// The billing service's version of a seat-limit update.
    pub seat_version: Option<u64>,
}

/// What moving an account to another tier does to its bundles: a tier change keeps
/// nothing the new tier cannot buy ([`entitlements::move_to_tier`]).
#[derive(Debug, Clone, Default)]
pub struct Moving {
    /// The bundles after the move, when some were removed (`None`: unchanged).
    pub bundles: Option<Vec<AppliedBundle>>,
    /// The bundles removed.
    pub removed: Vec<AppliedBundle>,
    /// One `billing.addon.remove` per bundle removed (`reason: tier_change`).
    pub audit: Vec<audit_chain::AuditEvent>,
}

/// The bundles of `current` once the account is on `tier`, and the audit of those
/// removed; part of the tier change's own transaction (its `plan`).
pub fn moving(
    config: &Config,
    caller: &Caller,
    root: &OrgRecord,
    current: &Current,
    tier: Tier,
) -> Moving {
    let (moved, removed) = entitlements::move_to_tier(&config.catalog, &current.account, tier);
    let audit = removed
        .iter()
        .map(|held| {
            event_on(
                caller,
                "billing.addon.remove",
                (&root.id, Some(&root.id)),
                ("subscription", &current.subscription.id),
                serde_json::json!({"bundleId": held.bundle, "quantity": held.quantity, "tier": current.account.tier, "reason": "tier_change"}),
            )
        })
        .collect();
    Moving {
        bundles: (!removed.is_empty()).then_some(moved.bundles),
        removed,
        audit,
    }
}

/// What a unit makes of its charge of `dimension` on a pool the service
/// synchronized first: done, or 429 `QUOTA_EXCEEDED` with the pool's figures; a pool
/// without a limit fails closed.
pub fn taken(charged: Charged, dimension: &'static str) -> ServiceResult<()> {
    match charged {
        Charged::Done => Ok(()),
        Charged::Refused(refusal) => Err(ServiceError::Quota { dimension, refusal }),
        Charged::Unsynced => Err(ServiceError::Broken(format!(
            "the {dimension} limit is not synchronized"
        ))),
    }
}

/// The id of the account root `org` draws from, without a read (teams nest one
/// level under their root).
pub fn root_id(org: &OrgRecord) -> &str {
    org.parent_org_id.as_deref().unwrap_or(&org.id)
}

/// The account root of `org` (itself, or a team's parent).
pub async fn root_of(store: &Store, org: &OrgRecord) -> ServiceResult<OrgRecord> {
    match &org.parent_org_id {
        Some(parent) => store
            .organization(parent)
            .await?
            .ok_or_else(|| ServiceError::Broken(format!("team {} lost its root", org.id))),
        None => Ok(org.clone()),
    }
}

/// The stored account of `root`; a value that does not decode fails closed.
pub async fn current(store: &Store, config: &Config, root: &OrgRecord) -> ServiceResult<Current> {
    let subscription = store
        .subscription_of(&root.id, &new_id(), Utc::now())
        .await?;
    let bundles = subscription
        .addons
        .iter()
        .map(|(id, quantity)| {
            let bundle = BundleId::parse(id)
                .ok_or_else(|| ServiceError::Broken(format!("stored add-on `{id}` is unknown")))?;
            let quantity = u32::try_from(*quantity).map_err(|_| {
                ServiceError::Broken(format!("stored add-on `{id}` has quantity {quantity}"))
            })?;
            Ok(AppliedBundle { bundle, quantity })
        })
        .collect::<ServiceResult<Vec<_>>>()?;
    let overrides = store
        .quota_overrides(&root.id)
        .await?
        .into_iter()
        .map(|(name, value)| {
            let dimension = Dimension::from_name(&name)
                .ok_or_else(|| ServiceError::Broken(format!("stored override `{name}`")))?;
            let limit = Limit::from_wire(value).ok_or_else(|| {
                ServiceError::Broken(format!("stored override of {name} is {value}"))
            })?;
            Ok((dimension, limit))
        })
        .collect::<ServiceResult<BTreeMap<_, _>>>()?;
    let granted: BTreeSet<Feature> = serde_json::from_str(&subscription.granted_features)
        .map_err(|e| ServiceError::Broken(format!("stored granted features: {e}")))?;
    let account = Account {
        tier: root.tier,
        is_system: root.is_system,
        billing: config.billing.provider,
        bundles,
    };
    Ok(Current {
        root: root.clone(),
        subscription,
        account,
        overrides,
        granted,
    })
}

/// Whether the account of `org` has `feature` (its tier, bundles, a super-admin's
/// grants, `FEATURES_FOR_ALL_TIERS`; the system organization has every feature):
/// read from the stored account at each call, so a downgrade takes it away at once
/// on every replica.
pub async fn require_feature(
    store: &Store,
    config: &Config,
    org: &OrgRecord,
    feature: Feature,
) -> ServiceResult<()> {
    let root = root_of(store, org).await?;
    let current = current(store, config, &root).await?;
    if entitlement(config, &current).features.contains(&feature) {
        Ok(())
    } else {
        Err(ServiceError::FeatureNotAvailable {
            feature,
            tier: current.account.tier,
        })
    }
}

/// The effective entitlement: the crate's, then the overrides and granted features
/// (the system organization keeps no caps whatever is stored).
pub fn entitlement(config: &Config, current: &Current) -> Entitlement {
    let derived = entitlements::effective(&config.catalog, &current.account);
    if current.account.is_system {
        return derived;
    }
    derived.adjusted(
        current.overrides.iter().map(|(d, l)| (*d, *l)),
        current.granted.iter().copied(),
    )
}

fn sync_of(root_id: &str, entitlement: &Entitlement) -> ServiceResult<LimitSync> {
    let features: Vec<Feature> = entitlement.purchased_features.iter().copied().collect();
    Ok(LimitSync {
        root_id: root_id.to_owned(),
        limits: entitlement
            .limits
            .iter()
            .filter(|l| l.dimension.is_quota_type())
            .map(|l| (l.dimension.name(), l.total.to_wire()))
            .collect(),
        seats: entitlement.limit(Dimension::Seats).to_wire(),
        features: serde_json::to_string(&features)
            .map_err(|e| ServiceError::Broken(format!("features do not serialize: {e}")))?,
    })
}

/// Commits a change of `root`'s account with its synchronization. `plan` sees the
/// account as stored and answers the change and its audit events (or a refusal);
/// when another change commits meanwhile, it runs again on the new state. Returns the
/// account and entitlement after the change.
pub async fn commit<F>(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    root: &OrgRecord,
    now: DateTime<Utc>,
    plan: F,
) -> ServiceResult<(Current, Entitlement)>
where
    F: Fn(&Current) -> ServiceResult<(Change, Vec<audit_chain::AuditEvent>)>,
{
    for _ in 0..ATTEMPTS {
        if let Some(done) = attempt(store, config, allowances, root, now, &plan).await? {
            return Ok(done);
        }
    }
    Err(ServiceError::Conflict(
        "the subscription kept changing; try again".to_owned(),
    ))
}

/// One try of [`commit`]: `None` when another change committed first.
async fn attempt<F>(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    root: &OrgRecord,
    now: DateTime<Utc>,
    plan: &F,
) -> ServiceResult<Option<(Current, Entitlement)>>
where
    F: Fn(&Current) -> ServiceResult<(Change, Vec<audit_chain::AuditEvent>)>,
{
    let before = current(store, config, root).await?;
    let (change, audit) = plan(&before)?;
    let mut after = before.clone();
    if let Some(bundles) = &change.bundles {
        after.account.bundles = bundles.clone();
    }
    if let Some(tier) = change.tier {
        after.account.tier = tier;
        after.root.tier = tier;
    }
    for (dimension, limit) in &change.overrides {
        match limit {
            Some(limit) => after.overrides.insert(*dimension, *limit),
            None => after.overrides.remove(dimension),
        };
    }
    if let Some(granted) = &change.granted {
        after.granted = granted.clone();
    }
    let entitlement = entitlement(config, &after);
    let granted_json = match &change.granted {
        Some(granted) => Some(
            serde_json::to_string(granted)
                .map_err(|e| ServiceError::Broken(format!("features do not serialize: {e}")))?,
        ),
        None => None,
    };
    let write = EntitlementWrite {
        subscription: (&before.subscription.id, before.subscription.version),
        addons: change.bundles.as_ref().map(|bundles| {
            bundles
                .iter()
                .map(|b| (b.bundle.as_str().to_owned(), i64::from(b.quantity)))
                .collect()
        }),
        tier: change.tier,
        overrides: change
            .overrides
            .iter()
            .map(|(d, l)| (d.name(), l.map(Limit::to_wire)))
            .collect(),
        granted_features: granted_json,
        seat_version: change
            .seat_version
            .map(|v| i64::try_from(v).unwrap_or(i64::MAX)),
        sync: sync_of(&root.id, &entitlement)?,
    };
    let committed = unit_of_work!(store, |tx| {
        if !tx.commit_entitlement(&write, now).await? {
            // Changed meanwhile: nothing of this change is kept.
            tx.abandon();
            return Ok(false);
        }
        tx.enqueue_audit(&audit).await?;
        Ok(true)
    })?;
    if committed {
        store.facts_changed();
        // The pool counts what was spent under the old limits, not what this
        // replica holds unspent (the others hear of it).
        crate::replica::allowance::give_back_account(store, allowances, &root.id).await;
        after.subscription.version += 1;
        return Ok(Some((after, entitlement)));
    }
    if change.seat_version.is_some() && store.seat_version(&root.id).await? >= change.seat_version {
        return Err(ServiceError::Conflict(
            "a newer seat-limit update is already applied".to_owned(),
        ));
    }
    Ok(None)
}

/// Synchronizes `root`'s entitlement when it never was (its pool rows or seat limit
/// have no value yet): before a charge or a seat check.
pub async fn ensure_synced(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    root: &OrgRecord,
) -> ServiceResult<()> {
    let names: Vec<&str> = Dimension::ALL
        .iter()
        .filter(|d| d.is_quota_type())
        .map(|d| d.name())
        .collect();
    // Many first requests of one account may race here: whichever commits first
    // synchronizes it for all.
    for _ in 0..ATTEMPTS {
        if store.entitlement_synced(&root.id, &names).await? {
            return Ok(());
        }
        let plain = |_: &Current| Ok((Change::default(), Vec::new()));
        if attempt(store, config, allowances, root, Utc::now(), &plain)
            .await?
            .is_some()
        {
            return Ok(());
        }
    }
    Err(ServiceError::Conflict(
        "the account's limits kept changing; try again".to_owned(),
    ))
}

/// Derives `root`'s limits again and writes them when they differ from the stored
/// ones (after a configuration change: the quota worker does it for every root
/// after a start, and writes nothing for an account whose limits stand).
pub async fn resync(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    root: &OrgRecord,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let stored = current(store, config, root).await?;
    let wanted = sync_of(&root.id, &entitlement(config, &stored))?;
    if store.is_synced_to(&wanted).await? {
        return Ok(());
    }
    commit(store, config, allowances, root, now, |_| {
        Ok((Change::default(), Vec::new()))
    })
    .await?;
    Ok(())
}

/// A user's flags as stored, checked against the catalog: a stored name the
/// catalog no longer has is an error (fail closed), never a silent pass.
pub async fn flags(
    store: &Store,
    kept: &KeptFacts,
    user_id: &str,
) -> ServiceResult<Arc<UserFlags>> {
    let load = async {
        let stored = store.user_features(user_id).await?;
        entitlements::check_user_flags(stored.iter())
            .map_err(|e| ServiceError::Broken(format!("user {user_id}: stored feature flag: {e}")))
    };
    kept.user_flags
        .get_or_load(store, user_id.to_owned(), |_| true, load)
        .await
}

/// Refuses a tier feature a flag took away from the user (403
/// `FEATURE_NOT_AVAILABLE`, as a tier without it is).
pub async fn require_user_feature(
    store: &Store,
    kept: &KeptFacts,
    user_id: &str,
    feature: Feature,
    tier: entitlements::Tier,
) -> ServiceResult<()> {
    if entitlements::user_keeps(&*flags(store, kept, user_id).await?, feature) {
        Ok(())
    } else {
        Err(ServiceError::FeatureNotAvailable { feature, tier })
    }
}
