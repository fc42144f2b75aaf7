//! Billing (document 3, "Add-on bundles"): the bundles offered, the account root's
//! subscription, add-on previews and purchases through the entitlements crate's one
//! `apply_change` (so a preview shows what a purchase commits), the billing portal,
//! and the platform's seat limit. Every change is committed with its entitlement
//! synchronization (`entitlement::commit`).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use entitlements::{
    AppliedBundle, BillingProvider, BundleChange, BundleId, Entitlement, Feature, Grant, Limit,
    LimitBreakdown, Tier,
};
use serde::Serialize;
use serde_json::json;

use super::entitlement::{self, Change, Current};
use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::replica::allowance::Allowances;
use crate::services::context::{event_on, Caller};
use crate::storage::OrgRecord;
use crate::storage::Store;

/// A bundle as offered.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Offer {
    /// `SEAT_PACK`...
    pub id: BundleId,
    /// What one unit grants.
    pub grant: Grant,
    /// Monthly price in cents.
    pub monthly_cents: u64,
    /// Annual price in cents.
    pub annual_cents: u64,
    /// Monthly price in dollars.
    pub monthly_usd: f64,
    /// Annual price in dollars.
    pub annual_usd: f64,
    /// Whether more than one unit may be held.
    pub stackable: bool,
    /// The tiers that may buy it.
    pub eligible_tiers: Vec<Tier>,
}

/// The bundles offered to the caller's account (its tier), or none when the
/// operator has not enabled bundles (`enabled` false) or billing is a marketplace's.
pub async fn offers(
    store: &Store,
    config: &Config,
    org: &OrgRecord,
) -> ServiceResult<(bool, Vec<Offer>)> {
    let catalog = &config.catalog;
    let root = entitlement::root_of(store, org).await?;
    let enabled = catalog.bundles_enabled
        && config.billing.provider == BillingProvider::Direct
        && !root.is_system;
    if !enabled {
        return Ok((false, Vec::new()));
    }
    let offers = BundleId::ALL
        .into_iter()
        .filter_map(|id| catalog.bundle(id))
        .filter(|b| b.eligible_tiers.contains(&root.tier))
        .map(|b| Offer {
            id: b.id,
            grant: b.grant,
            monthly_cents: b.monthly_cents,
            annual_cents: b.annual_cents,
            monthly_usd: dollars(b.monthly_cents),
            annual_usd: dollars(b.annual_cents),
            stackable: b.stackable,
            eligible_tiers: b.eligible_tiers.clone(),
        })
        .collect();
    Ok((true, offers))
}

fn dollars(cents: u64) -> f64 {
    cents as f64 / 100.0
}

/// A subscription and the entitlement it gives.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionView {
    /// Its id (`:id` of the add-on endpoints).
    pub id: String,
    /// The account root.
    pub org_id: String,
    /// The tier.
    pub tier: Tier,
    /// `active`.
    pub status: String,
    /// `direct` or `marketplace`.
    pub billing_provider: BillingProvider,
    /// Add-ons held.
    pub addons: Vec<AppliedBundle>,
    /// Raised by every change.
    pub version: i64,
    /// The effective entitlement: each limit with its base and bundle contributions.
    pub entitlement: EntitlementView,
}

/// An entitlement on the wire (limits as -1 or a number).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EntitlementView {
    /// The tier.
    pub tier: Tier,
    /// One breakdown per dimension (plugins, pipelines, seats, apiCalls, aiCalls,
    /// storage).
    pub limits: Vec<LimitBreakdown>,
    /// Every feature held.
    pub features: BTreeSet<Feature>,
    /// Features bought or granted (synchronized to the platform).
    pub purchased_features: BTreeSet<Feature>,
    /// Identity-provider configurations allowed.
    pub idp_configurations: u32,
}

impl From<Entitlement> for EntitlementView {
    fn from(e: Entitlement) -> Self {
        EntitlementView {
            tier: e.tier,
            limits: e.limits,
            features: e.features,
            purchased_features: e.purchased_features,
            idp_configurations: e.idp_configurations,
        }
    }
}

fn view(current: &Current, entitlement: Entitlement) -> SubscriptionView {
    SubscriptionView {
        id: current.subscription.id.clone(),
        org_id: current.root.id.clone(),
        tier: current.account.tier,
        status: current.subscription.status.clone(),
        billing_provider: current.account.billing,
        addons: current.account.bundles.clone(),
        version: current.subscription.version,
        entitlement: entitlement.into(),
    }
}

/// The subscription of `org`'s account.
pub async fn subscription(
    store: &Store,
    config: &Config,
    org: &OrgRecord,
) -> ServiceResult<SubscriptionView> {
    let root = entitlement::root_of(store, org).await?;
    let current = entitlement::current(store, config, &root).await?;
    let entitlement = entitlement::entitlement(config, &current);
    Ok(view(&current, entitlement))
}

/// The account of `org`, when `subscription_id` is its subscription (else 404).
async fn account_of(
    store: &Store,
    org: &OrgRecord,
    subscription_id: &str,
) -> ServiceResult<OrgRecord> {
    let root = entitlement::root_of(store, org).await?;
    match store.subscription(subscription_id).await? {
        Some(found) if found.org_id == root.id => Ok(root),
        _ => Err(ServiceError::NotFound("subscription".into())),
    }
}

/// The account after `change`, as the crate computes it: the one function both the
/// preview and the purchase call.
fn proposed(
    config: &Config,
    current: &Current,
    change: BundleChange,
) -> ServiceResult<(Current, Entitlement)> {
    let (account, _) = entitlements::apply_change(&config.catalog, &current.account, change)?;
    let mut after = current.clone();
    after.account = account;
    let entitlement = entitlement::entitlement(config, &after);
    Ok((after, entitlement))
}

/// What `change` would make of the subscription, committing nothing.
pub async fn preview(
    store: &Store,
    config: &Config,
    org: &OrgRecord,
    subscription_id: &str,
    change: BundleChange,
) -> ServiceResult<SubscriptionView> {
    let root = account_of(store, org, subscription_id).await?;
    let current = entitlement::current(store, config, &root).await?;
    let (after, entitlement) = proposed(config, &current, change)?;
    Ok(view(&after, entitlement))
}

/// Adds, re-sizes or removes an add-on, with the entitlement synchronized in the
/// same transaction.
pub async fn change(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    caller: &Caller,
    org: &OrgRecord,
    subscription_id: &str,
    change: BundleChange,
    now: DateTime<Utc>,
) -> ServiceResult<SubscriptionView> {
    let root = account_of(store, org, subscription_id).await?;
    let (after, entitlement) =
        entitlement::commit(store, config, allowances, &root, now, |current| {
            let (after, _) = proposed(config, current, change)?;
            let (action, details) = match change {
                BundleChange::Set { bundle, quantity } => (
                    "billing.addon.add",
                    json!({"bundleId": bundle, "quantity": quantity, "tier": current.account.tier}),
                ),
                BundleChange::Remove { bundle } => (
                    "billing.addon.remove",
                    json!({"bundleId": bundle, "tier": current.account.tier}),
                ),
            };
            let audit = vec![event_on(
                caller,
                action,
                (&org.id, Some(&current.root.id)),
                ("subscription", &current.subscription.id),
                details,
            )];
            Ok((
                Change {
                    bundles: Some(after.account.bundles),
                    ..Change::default()
                },
                audit,
            ))
        })
        .await?;
    Ok(view(&after, entitlement))
}

/// The billing portal's address for `org`'s account, from `BILLING_PORTAL_URL`.
pub async fn portal(store: &Store, config: &Config, org: &OrgRecord) -> ServiceResult<String> {
    let Some(template) = &config.billing.portal_url else {
        return Err(ServiceError::NotConfigured(
            "no billing portal is configured (BILLING_PORTAL_URL)".to_owned(),
        ));
    };
    let root = entitlement::root_of(store, org).await?;
    let current = entitlement::current(store, config, &root).await?;
    Ok(template
        .replace("{orgId}", &root.id)
        .replace("{subscriptionId}", &current.subscription.id))
}

/// Who sets a seat limit: a system admin or the billing service.
#[derive(Debug, Clone, Copy)]
pub enum SeatActor<'a> {
    /// A super-admin.
    Admin(&'a Caller),
    /// The billing service (its name).
    Service(&'a str),
}

/// What a seat-limit update sets.
#[derive(Debug, Clone)]
pub struct SeatLimit {
    /// Seats (-1 unlimited).
    pub seats: Limit,
    /// Purchased features, when given (they replace the granted ones).
    pub features: Option<BTreeSet<Feature>>,
    /// The sender's version: an older one than applied is 409.
    pub version: Option<u64>,
}

/// `PUT /organization/{orgId}/seat-limit`: the account root's seats and purchased
/// features, kept over the derived ones until changed again.
pub async fn set_seat_limit(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    actor: SeatActor<'_>,
    org_id: &str,
    update: SeatLimit,
    now: DateTime<Utc>,
) -> ServiceResult<SubscriptionView> {
    let org = store
        .organization(org_id)
        .await?
        .ok_or(ServiceError::NotFound("organization".into()))?;
    if org.parent_org_id.is_some() {
        return Err(ServiceError::invalid(
            "orgId",
            "seats are the account root's: a team draws from its root's",
        ));
    }
    if org.is_system {
        return Err(ServiceError::invalid(
            "orgId",
            "the system organization has no seat limit",
        ));
    }
    let details = json!({
        "seats": update.seats.to_wire(),
        "features": update.features,
        "version": update.version,
    });
    let audit = match actor {
        SeatActor::Admin(caller) => event_on(
            caller,
            "admin.org.seatLimit.update",
            (&org.id, Some(&org.id)),
            ("organization", &org.id),
            details,
        ),
        SeatActor::Service(service) => crate::audit::Action {
            action: "admin.org.seatLimit.update",
            actor_id: &format!("service:{service}"),
            actor_email: None,
            org_id: &org.id,
            affected_org_id: Some(&org.id),
            target_type: "organization",
            target_id: &org.id,
            details,
            outcome: "success",
        }
        .into_event(),
    };
    let (after, entitlement) = entitlement::commit(store, config, allowances, &org, now, |_| {
        Ok((
            Change {
                overrides: vec![(entitlements::Dimension::Seats, Some(update.seats))],
                granted: update.features.clone(),
                seat_version: update.version,
                ..Change::default()
            },
            vec![audit.clone()],
        ))
    })
    .await?;
    Ok(view(&after, entitlement))
}

/// `PATCH /organization/:id/tier`: the root's (and its teams') tier, with the limits
/// derived again in the same transaction. A tier change keeps nothing the new tier
/// cannot buy: the bundles it is not eligible for are removed in the same
/// transaction, each audited as `billing.addon.remove` (`reason: tier_change`), and
/// answered so that the caller sees what went.
pub async fn change_tier(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    caller: &Caller,
    org: &OrgRecord,
    tier: Tier,
    now: DateTime<Utc>,
) -> ServiceResult<Vec<entitlements::AppliedBundle>> {
    if org.parent_org_id.is_some() {
        return Err(ServiceError::invalid(
            "id",
            "a team has its account root's tier: change the root's",
        ));
    }
    let removed = std::sync::Mutex::new(Vec::new());
    entitlement::commit(store, config, allowances, org, now, |current| {
        let moving = entitlement::moving(config, caller, org, current, tier);
        let mut audit = vec![event_on(
            caller,
            "admin.org.tier.update",
            (&org.id, Some(&org.id)),
            ("organization", &org.id),
            json!({"from": current.account.tier, "to": tier, "removedBundles": moving.removed}),
        )];
        audit.extend(moving.audit);
        if let Ok(mut removed) = removed.lock() {
            *removed = moving.removed;
        }
        Ok((
            Change {
                tier: Some(tier),
                bundles: moving.bundles,
                ..Change::default()
            },
            audit,
        ))
    })
    .await?;
    Ok(removed.into_inner().unwrap_or_default())
}
