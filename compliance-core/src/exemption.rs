//! Exemptions: approved waivers of one rule for one entity.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Where an exemption stands in its approval workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExemptionStatus {
    /// Waiting for review.
    Requested,
    /// Approved by a reviewer who is not the requester: it waives.
    Approved,
    /// Rejected by a reviewer.
    Rejected,
    /// Revoked: it no longer waives.
    Revoked,
}

/// A waiver of one rule for one entity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exemption {
    /// The rule waived.
    pub rule_id: String,
    /// The plugin or pipeline the waiver applies to.
    pub entity_id: String,
    /// Its state.
    pub status: ExemptionStatus,
    /// When it stops waiving; never when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

impl Exemption {
    /// Whether this exemption waives `rule_id` for `entity_id` at `now`: approved,
    /// and not yet expired (it expires at `expires_at` exactly).
    pub fn waives(&self, rule_id: &str, entity_id: &str, now: DateTime<Utc>) -> bool {
        self.status == ExemptionStatus::Approved
            && self.rule_id == rule_id
            && self.entity_id == entity_id
            && self.expires_at.is_none_or(|at| now < at)
    }
}

/// The rules waived for the entity being evaluated.
///
/// ```
/// use compliance_core::{Exemption, ExemptionStatus, Waivers};
/// use chrono::{TimeZone, Utc};
///
/// let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
/// let exemptions = [Exemption {
///     rule_id: "r1".into(), entity_id: "plugin-7".into(),
///     status: ExemptionStatus::Approved, expires_at: None,
/// }];
/// let waivers = Waivers::for_entity(&exemptions, "plugin-7", now);
/// assert!(waivers.waives("r1"));
/// assert!(!Waivers::for_entity(&exemptions, "plugin-8", now).waives("r1"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Waivers {
    // INVARIANT: sorted and without duplicates, for binary search.
    rule_ids: Vec<String>,
}

impl Waivers {
    /// Nothing is waived.
    pub fn none() -> Self {
        Waivers::default()
    }

    /// Waives exactly these rule ids.
    pub fn for_rules<I, S>(rule_ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut rule_ids: Vec<String> = rule_ids.into_iter().map(Into::into).collect();
        rule_ids.sort();
        rule_ids.dedup();
        Waivers { rule_ids }
    }

    /// The rules that `exemptions` waive for `entity_id` at `now`.
    pub fn for_entity(exemptions: &[Exemption], entity_id: &str, now: DateTime<Utc>) -> Self {
        Waivers::for_rules(
            exemptions
                .iter()
                .filter(|e| e.waives(&e.rule_id, entity_id, now))
                .map(|e| e.rule_id.clone()),
        )
    }

    /// Whether `rule_id` is waived.
    pub fn waives(&self, rule_id: &str) -> bool {
        self.rule_ids
            .binary_search_by(|id| id.as_str().cmp(rule_id))
            .is_ok()
    }

    /// Whether nothing is waived.
    pub fn is_empty(&self) -> bool {
        self.rule_ids.is_empty()
    }
}
