//! Quota arithmetic: usage against limits, the at-risk test, increments, and pooled
//! accounting for teams. The atomic check-and-increment happens in the database;
//! this module decides what is allowed.

use serde::{Deserialize, Serialize};

use crate::limit::Limit;
use crate::tier::Dimension;

/// The most one increment call may add.
pub const MAX_INCREMENT: u64 = 1_000;

/// Usage of one dimension against its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// The dimension.
    pub dimension: Dimension,
    /// How much is used.
    pub used: u64,
    /// The limit in force.
    pub limit: Limit,
}

impl Usage {
    /// The percentage used; `None` when unlimited. A zero limit counts as full.
    pub fn percent_used(&self) -> Option<f64> {
        match self.limit {
            Limit::Unlimited => None,
            Limit::Finite(0) => Some(100.0),
            Limit::Finite(n) => Some(self.used as f64 * 100.0 / n as f64),
        }
    }
}

/// One organization's quota record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaRecord {
    /// The organization.
    pub org_id: String,
    /// Usage per dimension.
    pub usage: Vec<Usage>,
}

impl QuotaRecord {
    /// Whether any dimension is at or above `threshold_percent`.
    pub fn is_at_risk(&self, threshold_percent: f64) -> bool {
        self.usage
            .iter()
            .any(|u| u.percent_used().is_some_and(|p| p >= threshold_percent))
    }
}

/// The records at or above `threshold_percent` on any dimension.
///
/// ```
/// use entitlements::*;
/// let records = [QuotaRecord { org_id: "a".into(), usage: vec![
///     Usage { dimension: Dimension::Plugins, used: 20, limit: Limit::Finite(25) }] }];
/// assert_eq!(at_risk(&records, 80.0).count(), 1);
/// assert_eq!(at_risk(&records, 81.0).count(), 0);
/// ```
pub fn at_risk(
    records: &[QuotaRecord],
    threshold_percent: f64,
) -> impl Iterator<Item = &QuotaRecord> {
    records
        .iter()
        .filter(move |r| r.is_at_risk(threshold_percent))
}

/// Why an increment is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    /// An increment of 0.
    #[error("the increment must be at least 1")]
    ZeroIncrement,
    /// More than [`MAX_INCREMENT`] in one call.
    #[error("at most {MAX_INCREMENT} may be added per call, got {0}")]
    IncrementTooLarge(u64),
    /// The increment would pass the limit.
    #[error("quota exceeded: {used} used of {limit}, {requested} more requested")]
    Exceeded {
        /// Used before.
        used: u64,
        /// The finite limit.
        limit: u64,
        /// The increment asked for.
        requested: u64,
    },
}

/// The usage after adding `amount`, if allowed.
pub fn check_increment(used: u64, limit: Limit, amount: u64) -> Result<u64, QuotaError> {
    if amount == 0 {
        return Err(QuotaError::ZeroIncrement);
    }
    if amount > MAX_INCREMENT {
        return Err(QuotaError::IncrementTooLarge(amount));
    }
    let after = used.saturating_add(amount);
    match limit {
        Limit::Finite(n) if after > n => Err(QuotaError::Exceeded {
            used,
            limit: n,
            requested: amount,
        }),
        _ => Ok(after),
    }
}

/// Pooled accounting: a team draws from its root's caps. The increment is checked
/// against the pool (the whole subtree's usage and the root's effective limit) and,
/// when allowed, charged to both the team and the pool. Returns (team, pool) after.
///
/// ```
/// use entitlements::*;
/// assert_eq!(check_pooled_increment(3, 9, Limit::Finite(10), 1), Ok((4, 10)));
/// assert!(check_pooled_increment(0, 10, Limit::Finite(10), 1).is_err());
/// ```
pub fn check_pooled_increment(
    team_used: u64,
    pool_used: u64,
    pool_limit: Limit,
    amount: u64,
) -> Result<(u64, u64), QuotaError> {
    let pool_after = check_increment(pool_used, pool_limit, amount)?;
    Ok((team_used.saturating_add(amount), pool_after))
}
