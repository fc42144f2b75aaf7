//! What billing sends after a change: tracked quota limits to the quota service,
//! seats and purchased features to the platform. Both target the account root and
//! carry a version so that a receiver can ignore a stale update.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::entitlement::Entitlement;
use crate::limit::Limit;
use crate::tier::{Dimension, Feature};

/// The quota service's update: every tracked quota type's limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaSync {
    /// The account root.
    pub org_id: String,
    /// Increases with every change; a receiver ignores an older one.
    pub version: u64,
    /// Limit per tracked quota type (-1 is unlimited).
    pub limits: BTreeMap<Dimension, Limit>,
}

/// The platform's seat-limit update (`PUT /organization/{orgId}/seat-limit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeatLimitSync {
    /// The account root.
    pub org_id: String,
    /// Increases with every change; a receiver ignores an older one.
    pub version: u64,
    /// The seat limit (-1 is unlimited).
    pub seats: Limit,
    /// Features bought as bundles (audit_log, sso).
    pub features: Vec<Feature>,
}

impl QuotaSync {
    /// The update for `entitlement`.
    pub fn new(org_id: impl Into<String>, version: u64, entitlement: &Entitlement) -> Self {
        QuotaSync {
            org_id: org_id.into(),
            version,
            limits: entitlement
                .limits
                .iter()
                .filter(|l| l.dimension.is_quota_type())
                .map(|l| (l.dimension, l.total))
                .collect(),
        }
    }
}

impl SeatLimitSync {
    /// The update for `entitlement`.
    pub fn new(org_id: impl Into<String>, version: u64, entitlement: &Entitlement) -> Self {
        SeatLimitSync {
            org_id: org_id.into(),
            version,
            seats: entitlement.limit(Dimension::Seats),
            features: entitlement.purchased_features.iter().copied().collect(),
        }
    }
}

/// Whether an update of `incoming` version should replace the `stored` one.
pub fn is_newer(incoming: u64, stored: Option<u64>) -> bool {
    stored.is_none_or(|stored| incoming > stored)
}
