//! The period monthly quota types count in: a calendar month, UTC. Usage of such a
//! type starts again at zero when a new month begins.

use chrono::{DateTime, Datelike, TimeZone, Utc};

/// A calendar month, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Period {
    year: i32,
    month: u32,
}

impl Period {
    /// The month `at` falls in.
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use entitlements::Period;
    /// let p = Period::containing(Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).unwrap());
    /// assert_eq!(p.key(), "2026-12-01");
    /// assert_eq!(p.ends_at(), Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).single());
    /// ```
    pub fn containing(at: DateTime<Utc>) -> Period {
        Period {
            year: at.year(),
            month: at.month(),
        }
    }

    /// Its first day, `YYYY-MM-01`: the key stored with the usage counted in it
    /// (keys of later months sort after earlier ones).
    pub fn key(self) -> String {
        format!("{:04}-{:02}-01", self.year, self.month)
    }

    /// The month after.
    pub fn next(self) -> Period {
        if self.month >= 12 {
            Period {
                year: self.year.saturating_add(1),
                month: 1,
            }
        } else {
            Period {
                year: self.year,
                month: self.month + 1,
            }
        }
    }

    /// When it ends: the first instant of the next month (`None` past chrono's range).
    pub fn ends_at(self) -> Option<DateTime<Utc>> {
        let next = self.next();
        Utc.with_ymd_and_hms(next.year, next.month, 1, 0, 0, 0)
            .single()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn months_roll_over_at_midnight_utc() {
        let last = Utc.with_ymd_and_hms(2026, 11, 30, 23, 59, 59).unwrap();
        let first = Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap();
        assert_eq!(Period::containing(last).key(), "2026-11-01");
        assert_eq!(Period::containing(first).key(), "2026-12-01");
        assert_eq!(Period::containing(last).ends_at(), Some(first));
        assert_eq!(Period::containing(last).next(), Period::containing(first));
    }

    proptest! {
        /// Every instant falls before its period's end, and the end opens the next.
        #[test]
        fn an_instant_is_inside_its_period(seconds in 0_i64..8_000_000_000) {
            let at = Utc.timestamp_opt(seconds, 0).single().unwrap();
            let period = Period::containing(at);
            let end = period.ends_at().unwrap();
            prop_assert!(at < end);
            prop_assert_eq!(Period::containing(end), period.next());
            prop_assert!(period.key() < period.next().key());
        }
    }
}
