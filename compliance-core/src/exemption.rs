//! Exemptions: approved waivers of one rule for one entity.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Where an exemption stands in its approval workflow.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
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

/// What can be done to an exemption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExemptionAction {
    /// A reviewer approves a request.
    Approve,
    /// A reviewer rejects a request.
    Reject,
    /// Anyone who may write compliance withdraws a request or an approval.
    Revoke,
}

/// Why an exemption cannot take an action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExemptionRefusal {
    /// The requester may not review their own request (four eyes).
    #[error("you cannot review your own exemption request")]
    SelfReview,
    /// The action does not apply to the exemption's current state.
    #[error("an exemption that is {from} cannot be {action}", from = status_word(*.from), action = action_word(*.action))]
    Transition {
        /// The current state.
        from: ExemptionStatus,
        /// What was asked.
        action: ExemptionAction,
    },
}

fn status_word(status: ExemptionStatus) -> &'static str {
    match status {
        ExemptionStatus::Requested => "requested",
        ExemptionStatus::Approved => "approved",
        ExemptionStatus::Rejected => "rejected",
        ExemptionStatus::Revoked => "revoked",
    }
}

fn action_word(action: ExemptionAction) -> &'static str {
    match action {
        ExemptionAction::Approve => "approved",
        ExemptionAction::Reject => "rejected",
        ExemptionAction::Revoke => "revoked",
    }
}

impl ExemptionAction {
    /// The states this action may start from: a review decides a request only; a
    /// revocation withdraws a request or an approval. Rejected and revoked are final.
    pub fn from_states(self) -> &'static [ExemptionStatus] {
        match self {
            ExemptionAction::Approve | ExemptionAction::Reject => &[ExemptionStatus::Requested],
            ExemptionAction::Revoke => &[ExemptionStatus::Requested, ExemptionStatus::Approved],
        }
    }

    /// The state the action leads to.
    pub fn to_state(self) -> ExemptionStatus {
        match self {
            ExemptionAction::Approve => ExemptionStatus::Approved,
            ExemptionAction::Reject => ExemptionStatus::Rejected,
            ExemptionAction::Revoke => ExemptionStatus::Revoked,
        }
    }

    /// Whether `actor` may take this action on an exemption in state `from` that
    /// `requester` asked for; the new state when so.
    ///
    /// ```
    /// use compliance_core::{ExemptionAction, ExemptionRefusal, ExemptionStatus};
    /// let approve = ExemptionAction::Approve;
    /// assert_eq!(approve.decide(ExemptionStatus::Requested, "alice", "bob"), Ok(ExemptionStatus::Approved));
    /// assert_eq!(approve.decide(ExemptionStatus::Requested, "alice", "alice"), Err(ExemptionRefusal::SelfReview));
    /// assert!(approve.decide(ExemptionStatus::Revoked, "alice", "bob").is_err());
    /// // The requester may withdraw their own request.
    /// assert!(ExemptionAction::Revoke.decide(ExemptionStatus::Requested, "alice", "alice").is_ok());
    /// ```
    pub fn decide(
        self,
        from: ExemptionStatus,
        requester: &str,
        actor: &str,
    ) -> Result<ExemptionStatus, ExemptionRefusal> {
        let review = matches!(self, ExemptionAction::Approve | ExemptionAction::Reject);
        if review && requester == actor {
            return Err(ExemptionRefusal::SelfReview);
        }
        if !self.from_states().contains(&from) {
            return Err(ExemptionRefusal::Transition { from, action: self });
        }
        Ok(self.to_state())
    }
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

#[cfg(test)]
mod transitions {
    use super::{ExemptionAction as A, ExemptionRefusal, ExemptionStatus as S};

    #[test]
    fn every_state_and_action() {
        let allowed = [
            (S::Requested, A::Approve, Some(S::Approved)),
            (S::Requested, A::Reject, Some(S::Rejected)),
            (S::Requested, A::Revoke, Some(S::Revoked)),
            (S::Approved, A::Approve, None),
            (S::Approved, A::Reject, None),
            (S::Approved, A::Revoke, Some(S::Revoked)),
            (S::Rejected, A::Approve, None),
            (S::Rejected, A::Reject, None),
            (S::Rejected, A::Revoke, None),
            (S::Revoked, A::Approve, None),
            (S::Revoked, A::Reject, None),
            (S::Revoked, A::Revoke, None),
        ];
        for (from, action, to) in allowed {
            let got = action.decide(from, "requester", "reviewer");
            match to {
                Some(to) => assert_eq!(got, Ok(to), "{from:?} {action:?}"),
                None => assert_eq!(
                    got,
                    Err(ExemptionRefusal::Transition { from, action }),
                    "{from:?} {action:?}"
                ),
            }
        }
        // Four eyes: a review by the requester is refused whatever the state; a
        // revocation by the requester is not a review.
        for from in [S::Requested, S::Approved, S::Rejected, S::Revoked] {
            for action in [A::Approve, A::Reject] {
                assert_eq!(
                    action.decide(from, "same", "same"),
                    Err(ExemptionRefusal::SelfReview)
                );
            }
        }
        assert_eq!(
            A::Revoke.decide(S::Approved, "same", "same"),
            Ok(S::Revoked)
        );
        assert_eq!(
            A::Approve
                .decide(S::Revoked, "a", "b")
                .unwrap_err()
                .to_string(),
            "an exemption that is revoked cannot be approved"
        );
    }
}
