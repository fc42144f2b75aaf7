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
        let test = AtRiskTest::at(threshold_percent);
        self.usage.iter().any(|u| test.holds(u.used, u.limit))
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

/// The at-risk test of [`QuotaRecord::is_at_risk`] as a comparison a database can
/// make over stored rows, so that a page of accounts at risk is selected where the
/// rows are: a finite `limit` of which `used` is used is at risk when
/// `used * used_factor >= limit_factor * limit`, and a zero limit (full) when
/// `zero_limit_at_risk`.
///
/// ```
/// use entitlements::*;
/// let test = AtRiskTest::at(80.0);
/// assert!(test.holds(20, Limit::Finite(25)));
/// assert!(!test.holds(19, Limit::Finite(25)));
/// assert!(test.holds(0, Limit::Finite(0)));
/// assert!(!AtRiskTest::at(101.0).holds(0, Limit::Finite(0)));
/// assert!(!test.holds(u64::MAX, Limit::Unlimited));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AtRiskTest {
    /// What `used` is multiplied by (a percentage's 100).
    pub used_factor: f64,
    /// What the limit is multiplied by (the threshold, in percent).
    pub limit_factor: f64,
    /// Whether a zero limit, which counts as 100% used, is at risk.
    pub zero_limit_at_risk: bool,
}

impl AtRiskTest {
    /// The test for `threshold_percent`.
    pub fn at(threshold_percent: f64) -> AtRiskTest {
        AtRiskTest {
            used_factor: 100.0,
            limit_factor: threshold_percent,
            zero_limit_at_risk: threshold_percent <= 100.0,
        }
    }

    /// Whether `used` of `limit` is at risk (an unlimited limit never is).
    pub fn holds(&self, used: u64, limit: Limit) -> bool {
        match limit {
            Limit::Unlimited => false,
            Limit::Finite(0) => self.zero_limit_at_risk,
            Limit::Finite(n) => used as f64 * self.used_factor >= self.limit_factor * n as f64,
        }
    }
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
    charge(used, limit, amount)
}

/// Whether a pool with `limit`, `used` so far, takes a charge of `amount` more: the
/// usage after it, or [`QuotaError::Exceeded`]. The rule a conditional charge
/// restates in SQL (`limit < 0 OR used + amount <= limit`), which the adapters test
/// against this function over a grid of values.
///
/// ```
/// use entitlements::{charge, Limit, QuotaError};
/// assert_eq!(charge(9, Limit::Finite(10), 1), Ok(10));
/// assert_eq!(
///     charge(10, Limit::Finite(10), 1),
///     Err(QuotaError::Exceeded { used: 10, limit: 10, requested: 1 })
/// );
/// assert_eq!(charge(10, Limit::Finite(10), 0), Ok(10));
/// assert_eq!(charge(u64::MAX, Limit::Unlimited, 5), Ok(u64::MAX));
/// ```
pub fn charge(used: u64, limit: Limit, amount: u64) -> Result<u64, QuotaError> {
    let after = used.saturating_add(amount);
    match limit {
        Limit::Finite(n) if !limit.allows(after) => Err(QuotaError::Exceeded {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The linear test agrees with the percentage a quota answers, on every
    /// threshold and usage of a grid around the edges.
    #[test]
    fn the_at_risk_test_is_the_percentage_s() {
        for threshold in [0.0, 1.0, 50.0, 79.9, 80.0, 80.1, 99.0, 100.0, 100.5, 150.0] {
            let test = AtRiskTest::at(threshold);
            for limit in [0u64, 1, 3, 7, 25, 100, 1000] {
                for used in 0..=limit.saturating_mul(2).max(3) {
                    let usage = Usage {
                        dimension: Dimension::Plugins,
                        used,
                        limit: Limit::Finite(limit),
                    };
                    let expected = usage.percent_used().is_some_and(|p| p >= threshold);
                    assert_eq!(
                        test.holds(used, Limit::Finite(limit)),
                        expected,
                        "{used}/{limit} at {threshold}"
                    );
                }
            }
        }
    }
}
