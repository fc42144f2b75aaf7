//! An announcement's severity, window and audience.

use chrono::{DateTime, Utc};
use entitlements::Tier;
use serde::{Deserialize, Serialize};

use crate::MessageError;

/// How prominent an announcement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "schema", schema(as = AnnouncementSeverity))]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// For information.
    Info,
    /// Worth attention.
    Warning,
    /// Needs action.
    Critical,
}

impl Severity {
    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }

    /// The severity of this name.
    pub fn parse(text: &str) -> Option<Severity> {
        [Severity::Info, Severity::Warning, Severity::Critical]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// Where an announcement stands at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "schema", schema(as = AnnouncementPhase))]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Before its start.
    Scheduled,
    /// Shown.
    Active,
    /// At or after its end.
    Ended,
}

/// When an announcement is shown: from `starts_at`, until `ends_at` (excluded) or,
/// without one, until it is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The first instant shown.
    pub starts_at: DateTime<Utc>,
    /// The first instant no longer shown.
    pub ends_at: Option<DateTime<Utc>>,
}

impl Window {
    /// A window; an end at or before the start is refused (naming `endsAt`).
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use messaging::{Phase, Window};
    /// let at = |h| Utc.with_ymd_and_hms(2026, 11, 26, h, 0, 0).unwrap();
    /// let w = Window::new(at(10), Some(at(12))).unwrap();
    /// assert_eq!(w.phase(at(9)), Phase::Scheduled);
    /// assert_eq!(w.phase(at(10)), Phase::Active);
    /// assert_eq!(w.phase(at(12)), Phase::Ended);
    /// assert!(Window::new(at(12), Some(at(12))).is_err());
    /// assert_eq!(Window::new(at(10), None).unwrap().phase(at(23)), Phase::Active);
    /// ```
    pub fn new(
        starts_at: DateTime<Utc>,
        ends_at: Option<DateTime<Utc>>,
    ) -> Result<Window, MessageError> {
        if ends_at.is_some_and(|end| end <= starts_at) {
            return Err(MessageError::new("endsAt", "must be after startsAt"));
        }
        Ok(Window { starts_at, ends_at })
    }

    /// Where the window stands at `now`.
    pub fn phase(&self, now: DateTime<Utc>) -> Phase {
        if now < self.starts_at {
            Phase::Scheduled
        } else if self.ends_at.is_some_and(|end| now >= end) {
            Phase::Ended
        } else {
            Phase::Active
        }
    }
}

/// Which of an organization's teams an organization's announcement reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Teams {
    /// The organization only.
    None,
    /// Every team of it, present and future.
    All,
    /// These teams.
    Listed(Vec<String>),
}

/// Who an announcement reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audience {
    /// An organization (posted by its admins), and some of its teams.
    Organization {
        /// The organization.
        org_id: String,
        /// Its teams reached.
        teams: Teams,
    },
    /// These organizations (a super-admin's).
    Organizations(Vec<String>),
    /// Every organization (a super-admin's).
    Everyone,
    /// Every organization of a tier (a super-admin's).
    Tier(Tier),
}

/// The organization an announcement is read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Viewer<'a> {
    /// The organization.
    pub org_id: &'a str,
    /// Its parent, for a team.
    pub parent_org_id: Option<&'a str>,
    /// Its tier.
    pub tier: Tier,
}

impl Audience {
    /// Whether only a super-admin may post it.
    pub fn is_platform(&self) -> bool {
        !matches!(self, Audience::Organization { .. })
    }

    /// Whether it reaches the viewer's organization.
    ///
    /// ```
    /// use entitlements::Tier;
    /// use messaging::{Audience, Teams, Viewer};
    /// let team = Viewer { org_id: "t1", parent_org_id: Some("acme"), tier: Tier::Pro };
    /// let root = Viewer { org_id: "acme", parent_org_id: None, tier: Tier::Pro };
    /// let own = |teams| Audience::Organization { org_id: "acme".into(), teams };
    /// assert!(own(Teams::None).reaches(&root) && !own(Teams::None).reaches(&team));
    /// assert!(own(Teams::All).reaches(&team));
    /// assert!(own(Teams::Listed(vec!["t1".into()])).reaches(&team));
    /// assert!(!own(Teams::Listed(vec!["t2".into()])).reaches(&team));
    /// assert!(Audience::Tier(Tier::Pro).reaches(&team) && !Audience::Tier(Tier::Team).reaches(&root));
    /// assert!(Audience::Organizations(vec!["acme".into()]).reaches(&root));
    /// assert!(!Audience::Organizations(vec!["acme".into()]).reaches(&team));
    /// assert!(Audience::Everyone.reaches(&team));
    /// ```
    pub fn reaches(&self, viewer: &Viewer<'_>) -> bool {
        match self {
            Audience::Organization { org_id, teams } => {
                viewer.org_id == org_id
                    || (viewer.parent_org_id == Some(org_id.as_str())
                        && match teams {
                            Teams::None => false,
                            Teams::All => true,
                            Teams::Listed(listed) => listed.iter().any(|t| t == viewer.org_id),
                        })
            }
            Audience::Organizations(listed) => listed.iter().any(|o| o == viewer.org_id),
            Audience::Everyone => true,
            Audience::Tier(tier) => *tier == viewer.tier,
        }
    }
}
