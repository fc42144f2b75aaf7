//! Tiers, add-on bundles, effective limits, previews and quota arithmetic.
//!
//! The crate reads no environment and keeps no state: the caller passes the
//! configuration overrides ([`Catalog::from_overrides`]), the account and its
//! usage, and stores what comes back. Money is integer cents. A limit is
//! [`Limit::Finite`] or [`Limit::Unlimited`] inside the crate and -1 on the wire.
//!
//! ```
//! use entitlements::*;
//! let catalog = Catalog::from_overrides([("BILLING_BUNDLES_ENABLED", "true")]).unwrap();
//! let account = Account::on(Tier::Pro);
//! let (_, preview) = apply_change(&catalog, &account,
//!     BundleChange::Set { bundle: BundleId::PipelinePack, quantity: 2 }).unwrap();
//! assert_eq!(preview.limit(Dimension::Pipelines), Limit::Finite(30));
//! assert_eq!(serde_json::to_value(preview.limit(Dimension::ApiCalls)).unwrap(), -1);
//! ```

mod bundle;
mod catalog;
mod entitlement;
mod limit;
mod namespace;
mod period;
mod sync;
mod tier;
mod usage;
mod user_flags;

pub use bundle::{Bundle, BundleId, Grant, SSO_IDP_CONFIGURATIONS};
pub use catalog::{Catalog, ConfigError};
pub use entitlement::move_to_tier;
pub use entitlement::{
    apply_change, effective, Account, AppliedBundle, BillingProvider, BundleChange, Contribution,
    Entitlement, LimitBreakdown, PurchaseError, MAX_QUANTITY,
};
pub use limit::Limit;
pub use namespace::{
    build_compute, build_namespace, namespace_name, BuildCompute, KubeObject, Metadata,
    NamespaceInput, RegistryAddress,
};
pub use period::Period;
pub use sync::{is_newer, QuotaSync, SeatLimitSync};
pub use tier::{Dimension, Feature, Tier, TierPlan};
pub use usage::{
    at_risk, charge, check_increment, check_pooled_increment, AtRiskTest, QuotaError, QuotaRecord,
    Usage, MAX_INCREMENT,
};
pub use user_flags::{
    check_user_flags, effective_user_features, user_keeps, FlagError, UserFlag, UserFlags,
    PREVIEW_FEATURES,
};
