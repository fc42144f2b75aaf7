//! Whether a platform administrator may see what a user sees: a stated reason of at
//! least [`MIN_REASON_CHARS`], at most [`MAX_MINUTES`], never oneself nor another
//! super-admin, and only where the platform allows impersonation at all. An
//! impersonation is live until it ends or expires.
//!
//! ```
//! use tenancy::impersonation::*;
//! let ask = Ask {
//!     enabled: true,
//!     admin: "root",
//!     target: "ada",
//!     target_super_admin: false,
//!     reason: "ticket 4711: a rule blocks her pipeline",
//!     minutes: 30,
//! };
//! assert_eq!(check(&ask), Ok(()));
//! assert_eq!(check(&Ask { minutes: 61, ..ask }), Err(Refusal::Minutes));
//! assert_eq!(check(&Ask { target: "root", ..ask }), Err(Refusal::Oneself));
//! ```

use chrono::{DateTime, Utc};

/// The shortest reason, in characters (trimmed).
pub const MIN_REASON_CHARS: usize = 10;
/// The longest reason, in characters.
pub const MAX_REASON_CHARS: usize = 500;
/// The longest impersonation, in minutes.
pub const MAX_MINUTES: u32 = 60;

/// What is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask<'a> {
    /// Whether the platform allows impersonation (`IMPERSONATION_ENABLED`).
    pub enabled: bool,
    /// The administrator.
    pub admin: &'a str,
    /// The user to be seen as.
    pub target: &'a str,
    /// Whether that user is a super-admin.
    pub target_super_admin: bool,
    /// Why.
    pub reason: &'a str,
    /// For how long.
    pub minutes: u32,
}

/// Why an impersonation is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The platform does not allow it.
    #[error("impersonation is disabled on this platform (IMPERSONATION_ENABLED=false)")]
    Disabled,
    /// The reason is too short or too long, or holds control characters.
    #[error("a reason of {MIN_REASON_CHARS} to {MAX_REASON_CHARS} characters, without control characters, is required")]
    Reason,
    /// Not 1 to [`MAX_MINUTES`] minutes.
    #[error("from 1 to {MAX_MINUTES} minutes")]
    Minutes,
    /// An administrator cannot impersonate itself.
    #[error("an administrator cannot impersonate itself")]
    Oneself,
    /// Nobody impersonates a super-admin.
    #[error("a super-admin cannot be impersonated")]
    SuperAdmin,
}

/// Checks an impersonation before it starts.
pub fn check(ask: &Ask<'_>) -> Result<(), Refusal> {
    if !ask.enabled {
        return Err(Refusal::Disabled);
    }
    let reason = ask.reason.trim();
    let chars = reason.chars().count();
    if !(MIN_REASON_CHARS..=MAX_REASON_CHARS).contains(&chars)
        || reason.chars().any(char::is_control)
    {
        return Err(Refusal::Reason);
    }
    if !(1..=MAX_MINUTES).contains(&ask.minutes) {
        return Err(Refusal::Minutes);
    }
    if ask.admin == ask.target {
        return Err(Refusal::Oneself);
    }
    if ask.target_super_admin {
        return Err(Refusal::SuperAdmin);
    }
    Ok(())
}

/// Whether an impersonation still stands at `now`: not ended, not expired.
pub fn is_live(ended: bool, expires_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    !ended && now < expires_at
}

/// Whether a request may be made under a read-only impersonation: reads only.
pub fn read_only_allows(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask() -> Ask<'static> {
        Ask {
            enabled: true,
            admin: "root",
            target: "ada",
            target_super_admin: false,
            reason: "0123456789",
            minutes: 60,
        }
    }

    #[test]
    fn each_refusal() {
        assert_eq!(check(&ask()), Ok(()));
        assert_eq!(
            check(&Ask {
                enabled: false,
                ..ask()
            }),
            Err(Refusal::Disabled)
        );
        for reason in [
            "too short",
            "          0123456789  \u{7}",
            &"x".repeat(501),
            "   012345678   ",
        ] {
            assert_eq!(
                check(&Ask { reason, ..ask() }),
                Err(Refusal::Reason),
                "{reason:?}"
            );
        }
        assert_eq!(
            check(&Ask {
                minutes: 0,
                ..ask()
            }),
            Err(Refusal::Minutes)
        );
        assert_eq!(
            check(&Ask {
                minutes: 61,
                ..ask()
            }),
            Err(Refusal::Minutes)
        );
        assert_eq!(
            check(&Ask {
                target: "root",
                ..ask()
            }),
            Err(Refusal::Oneself)
        );
        assert_eq!(
            check(&Ask {
                target_super_admin: true,
                ..ask()
            }),
            Err(Refusal::SuperAdmin)
        );
    }

    #[test]
    fn live_until_ended_or_expired() {
        let now = DateTime::<Utc>::from_timestamp(1_000_000, 0).unwrap();
        let later = now + chrono::Duration::minutes(5);
        assert!(is_live(false, later, now));
        assert!(!is_live(true, later, now));
        assert!(!is_live(false, now, now));
        assert!(
            read_only_allows("GET") && !read_only_allows("POST") && !read_only_allows("DELETE")
        );
    }
}
