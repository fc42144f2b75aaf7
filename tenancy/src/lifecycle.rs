//! An organization's life after delete: how long it can be restored, and from when
//! its data is purged. One window decides both, so a restore is never refused for
//! data that is still there, nor allowed for data that is gone.

use chrono::{DateTime, Duration, Utc};

/// How long after its delete an organization can be restored (`ORG_RESTORE_DAYS`).
///
/// ```
/// use chrono::{Duration, TimeZone, Utc};
/// use tenancy::RestoreWindow;
/// let window = RestoreWindow::days(30);
/// let deleted = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
/// assert!(window.is_open(deleted, deleted + Duration::days(30)));
/// assert!(!window.is_open(deleted, deleted + Duration::days(30) + Duration::seconds(1)));
/// // What is past the window at `now` is exactly what was deleted before the cutoff.
/// let now = deleted + Duration::days(31);
/// assert!(deleted < window.purge_before(now));
/// assert!(!window.is_open(deleted, now));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreWindow {
    length: Duration,
}

impl RestoreWindow {
    /// A window of `days` days.
    pub fn days(days: u32) -> RestoreWindow {
        RestoreWindow {
            length: Duration::days(i64::from(days)),
        }
    }

    /// Whether an organization deleted at `deleted_at` can still be restored at `now`.
    pub fn is_open(self, deleted_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        now - deleted_at <= self.length
    }

    /// At `now`, the organizations deleted before this instant are past the window
    /// and are purged.
    pub fn purge_before(self, now: DateTime<Utc>) -> DateTime<Utc> {
        now - self.length
    }
}
