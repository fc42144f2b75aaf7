//! The effective entitlement of an account, and bundle changes: one function
//! computes both the preview and the purchase, so a preview shows exactly what a
//! purchase commits.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::bundle::{BundleId, Grant, SSO_IDP_CONFIGURATIONS};
use crate::catalog::Catalog;
use crate::limit::Limit;
use crate::tier::{Dimension, Feature, Tier};

/// The most units of one bundle an account may hold.
pub const MAX_QUANTITY: u32 = 10_000;

/// Who bills the account.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BillingProvider {
    /// Self-service billing: bundles can be bought here.
    #[default]
    Direct,
    /// A cloud marketplace: entitlements come from the marketplace.
    Marketplace,
}

/// Units of a bundle an account holds.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedBundle {
    /// The bundle.
    pub bundle: BundleId,
    /// How many units (1 for a non-stackable bundle).
    pub quantity: u32,
}

/// An account root: its tier and its bundles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    /// The subscription tier.
    pub tier: Tier,
    /// The system organization has every feature and no caps.
    #[serde(default)]
    pub is_system: bool,
    /// Who bills the account.
    #[serde(default)]
    pub billing: BillingProvider,
    /// The bundles held, at most one entry per bundle.
    #[serde(default)]
    pub bundles: Vec<AppliedBundle>,
}

impl Account {
    /// An account on `tier` with no bundles.
    pub fn on(tier: Tier) -> Account {
        Account {
            tier,
            is_system: false,
            billing: BillingProvider::Direct,
            bundles: Vec::new(),
        }
    }
}

/// One bundle's share of a limit.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Contribution {
    /// The bundle.
    pub bundle: BundleId,
    /// Units held.
    pub quantity: u32,
    /// grant x quantity.
    pub amount: u64,
}

/// A limit and where it comes from.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitBreakdown {
    /// The dimension.
    pub dimension: Dimension,
    /// base + every contribution (unlimited when the base is).
    pub total: Limit,
    /// The tier's base.
    pub base: Limit,
    /// Each bundle's contribution.
    pub contributions: Vec<Contribution>,
    /// A system admin's override, which is the total when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overridden: Option<Limit>,
}

/// What an account may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entitlement {
    /// The tier.
    pub tier: Tier,
    /// One breakdown per dimension, in `Dimension::ALL` order.
    pub limits: Vec<LimitBreakdown>,
    /// Features from the tier and from bundles.
    pub features: BTreeSet<Feature>,
    /// Features unlocked by bundles (synchronized to the platform).
    pub purchased_features: BTreeSet<Feature>,
    /// Identity-provider configurations allowed.
    pub idp_configurations: u32,
}

impl Entitlement {
    /// The total limit of one dimension.
    pub fn limit(&self, dimension: Dimension) -> Limit {
        self.limits
            .iter()
            .find(|l| l.dimension == dimension)
            .map_or(Limit::Unlimited, |l| l.total)
    }
}

impl Entitlement {
    /// The entitlement with a system admin's limits and granted features on top: an
    /// overridden limit is the override (lower or higher than the derived one), a
    /// granted feature is held as if bought.
    ///
    /// ```
    /// use entitlements::*;
    /// let e = effective(&Catalog::default(), &Account::on(Tier::Developer))
    ///     .adjusted([(Dimension::Pipelines, Limit::Finite(7))], [Feature::Sso]);
    /// assert_eq!(e.limit(Dimension::Pipelines), Limit::Finite(7));
    /// assert!(e.purchased_features.contains(&Feature::Sso));
    /// ```
    pub fn adjusted(
        mut self,
        overrides: impl IntoIterator<Item = (Dimension, Limit)>,
        granted: impl IntoIterator<Item = Feature>,
    ) -> Entitlement {
        for (dimension, limit) in overrides {
            if let Some(breakdown) = self.limits.iter_mut().find(|l| l.dimension == dimension) {
                breakdown.total = limit;
                breakdown.overridden = Some(limit);
            }
        }
        for feature in granted {
            self.features.insert(feature);
            self.purchased_features.insert(feature);
            if feature == Feature::Sso {
                self.idp_configurations = SSO_IDP_CONFIGURATIONS;
            }
        }
        self
    }
}

/// A change of bundles, as previewed or purchased.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "op")]
pub enum BundleChange {
    /// Add a bundle, or set the quantity of one already held.
    Set {
        /// The bundle.
        bundle: BundleId,
        /// The quantity wanted.
        quantity: u32,
    },
    /// Remove a bundle.
    Remove {
        /// The bundle.
        bundle: BundleId,
    },
}

/// Why a bundle change is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PurchaseError {
    /// The operator has not enabled bundles.
    #[error("add-on bundles are not enabled")]
    BundlesDisabled,
    /// Entitlements come from the marketplace.
    #[error("the account is billed through a cloud marketplace; bundles cannot be bought here")]
    MarketplaceManaged,
    /// The bundle is not offered.
    #[error("bundle `{0}` is not offered")]
    UnknownBundle(BundleId),
    /// The account's tier may not buy the bundle.
    #[error("bundle `{bundle}` is not available on the {tier:?} tier")]
    NotEligible {
        /// The bundle.
        bundle: BundleId,
        /// The account's tier.
        tier: Tier,
    },
    /// A non-stackable bundle with a quantity above 1.
    #[error("bundle `{0}` is not stackable: at most one per account")]
    NotStackable(BundleId),
    /// Quantity 0 or above the maximum.
    #[error("quantity must be between 1 and {MAX_QUANTITY}, got {0}")]
    InvalidQuantity(u32),
    /// Removing a bundle the account does not hold.
    #[error("the account holds no `{0}` bundle")]
    NotHeld(BundleId),
}

/// The effective entitlement: base + Σ grant x quantity per dimension (unlimited
/// stays unlimited), features unioned.
///
/// ```
/// use entitlements::*;
/// let mut account = Account::on(Tier::Pro);
/// account.bundles.push(AppliedBundle { bundle: BundleId::PluginPack, quantity: 2 });
/// let e = effective(&Catalog::default(), &account);
/// assert_eq!(e.limit(Dimension::Plugins), Limit::Finite(250));
/// ```
pub fn effective(catalog: &Catalog, account: &Account) -> Entitlement {
    if account.is_system {
        return Entitlement {
            tier: account.tier,
            limits: Dimension::ALL
                .iter()
                .map(|&dimension| LimitBreakdown {
                    dimension,
                    total: Limit::Unlimited,
                    base: Limit::Unlimited,
                    contributions: Vec::new(),
                    overridden: None,
                })
                .collect(),
            features: Feature::ALL.into_iter().collect(),
            purchased_features: BTreeSet::new(),
            idp_configurations: SSO_IDP_CONFIGURATIONS,
        };
    }
    let plan = catalog.plan(account.tier);
    let mut limits: Vec<LimitBreakdown> = Dimension::ALL
        .iter()
        .map(|&dimension| {
            let base = plan.limit(dimension);
            LimitBreakdown {
                dimension,
                total: base,
                base,
                contributions: Vec::new(),
                overridden: None,
            }
        })
        .collect();
    let mut features: BTreeSet<Feature> = plan.features.iter().copied().collect();
    features.extend(catalog.features_for_all.iter().copied());
    let mut purchased_features = BTreeSet::new();
    // Enterprise includes SSO, with the bundle's number of configurations.
    let mut idp_configurations = if features.contains(&Feature::Sso) {
        SSO_IDP_CONFIGURATIONS
    } else {
        0
    };
    for held in &account.bundles {
        let Some(bundle) = catalog.bundle(held.bundle) else {
            continue;
        };
        match bundle.grant {
            Grant::Limit { dimension, amount } => {
                if let Some(limit) = limits.iter_mut().find(|l| l.dimension == dimension) {
                    let amount = amount.saturating_mul(u64::from(held.quantity));
                    limit.total = limit.total.raised_by(amount);
                    limit.contributions.push(Contribution {
                        bundle: held.bundle,
                        quantity: held.quantity,
                        amount,
                    });
                }
            }
            Grant::Feature { feature } => {
                features.insert(feature);
                purchased_features.insert(feature);
                if feature == Feature::Sso {
                    idp_configurations = SSO_IDP_CONFIGURATIONS;
                }
            }
        }
    }
    Entitlement {
        tier: account.tier,
        limits,
        features,
        purchased_features,
        idp_configurations,
    }
}

/// The account moved to `tier`: a tier change keeps nothing the new tier cannot buy,
/// so the bundles `tier` is not eligible for (by the catalog, overrides included)
/// are removed. Answers the account after the move and the bundles removed, in the
/// order they were held.
///
/// ```
/// use entitlements::*;
/// let catalog = Catalog::from_overrides([("BILLING_BUNDLES_ENABLED", "true")]).unwrap();
/// let mut account = Account::on(Tier::Pro);
/// account.bundles.push(AppliedBundle { bundle: BundleId::AuditLog, quantity: 1 });
/// account.bundles.push(AppliedBundle { bundle: BundleId::SeatPack, quantity: 2 });
/// let (moved, removed) = move_to_tier(&catalog, &account, Tier::Developer);
/// assert_eq!(moved.tier, Tier::Developer);
/// assert_eq!(removed, [AppliedBundle { bundle: BundleId::AuditLog, quantity: 1 }]);
/// assert_eq!(moved.bundles, [AppliedBundle { bundle: BundleId::SeatPack, quantity: 2 }]);
/// ```
pub fn move_to_tier(
    catalog: &Catalog,
    account: &Account,
    tier: Tier,
) -> (Account, Vec<AppliedBundle>) {
    let mut moved = account.clone();
    moved.tier = tier;
    let (kept, removed): (Vec<AppliedBundle>, Vec<AppliedBundle>) =
        account.bundles.iter().partition(|held| {
            catalog
                .bundle(held.bundle)
                .is_some_and(|offered| offered.eligible_tiers.contains(&tier))
        });
    moved.bundles = kept;
    (moved, removed)
}

/// Applies a bundle change to an account and computes the resulting entitlement.
/// A preview shows the entitlement and discards the account; a purchase stores
/// both. Every refusal is a [`PurchaseError`] and leaves the account unchanged.
///
/// ```
/// use entitlements::*;
/// let catalog = Catalog::from_overrides([("BILLING_BUNDLES_ENABLED", "true")]).unwrap();
/// let account = Account::on(Tier::Developer);
/// let change = BundleChange::Set { bundle: BundleId::Sso, quantity: 1 };
/// assert!(matches!(apply_change(&catalog, &account, change), Err(PurchaseError::NotEligible { .. })));
/// let change = BundleChange::Set { bundle: BundleId::SeatPack, quantity: 3 };
/// let (account, entitlement) = apply_change(&catalog, &account, change).unwrap();
/// assert_eq!(entitlement.limit(Dimension::Seats), Limit::Finite(16));
/// assert_eq!(account.bundles.len(), 1);
/// ```
pub fn apply_change(
    catalog: &Catalog,
    account: &Account,
    change: BundleChange,
) -> Result<(Account, Entitlement), PurchaseError> {
    if !catalog.bundles_enabled {
        return Err(PurchaseError::BundlesDisabled);
    }
    if account.billing == BillingProvider::Marketplace {
        return Err(PurchaseError::MarketplaceManaged);
    }
    let mut next = account.clone();
    match change {
        BundleChange::Set { bundle, quantity } => {
            let offered = catalog
                .bundle(bundle)
                .ok_or(PurchaseError::UnknownBundle(bundle))?;
            if quantity == 0 || quantity > MAX_QUANTITY {
                return Err(PurchaseError::InvalidQuantity(quantity));
            }
            if !offered.stackable && quantity > 1 {
                return Err(PurchaseError::NotStackable(bundle));
            }
            if !offered.eligible_tiers.contains(&account.tier) {
                return Err(PurchaseError::NotEligible {
                    bundle,
                    tier: account.tier,
                });
            }
            match next.bundles.iter_mut().find(|b| b.bundle == bundle) {
                Some(held) => held.quantity = quantity,
                None => next.bundles.push(AppliedBundle { bundle, quantity }),
            }
        }
        BundleChange::Remove { bundle } => {
            let before = next.bundles.len();
            next.bundles.retain(|b| b.bundle != bundle);
            if next.bundles.len() == before {
                return Err(PurchaseError::NotHeld(bundle));
            }
        }
    }
    let entitlement = effective(catalog, &next);
    Ok((next, entitlement))
}
