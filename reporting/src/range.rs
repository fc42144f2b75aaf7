//! A report's time range and its buckets. The range is `[from, to)`; left out, it is
//! the last [`DEFAULT_DAYS`] days before now; it may span at most [`MAX_DAYS`].
//! Buckets start on the hour, the day (UTC) or the week (Monday, UTC), from the one
//! holding `from` to the one holding the instant before `to`; every bucket is
//! present, empty ones as zeros.

use chrono::{DateTime, Datelike, Duration, DurationRound, Utc};
use serde::{Deserialize, Serialize};

/// The range when none is given, in days before now.
pub const DEFAULT_DAYS: i64 = 30;
/// The longest range, in days.
pub const MAX_DAYS: i64 = 366;
/// The most buckets a series holds (a year of hours fits).
pub const MAX_BUCKETS: usize = 9_000;

/// A bucket's width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    /// An hour.
    Hour,
    /// A day (UTC).
    #[default]
    Day,
    /// A week from Monday (UTC).
    Week,
}

impl Granularity {
    /// Reads `hour`, `day` or `week`.
    pub fn parse(text: &str) -> Option<Granularity> {
        match text {
            "hour" => Some(Granularity::Hour),
            "day" => Some(Granularity::Day),
            "week" => Some(Granularity::Week),
            _ => None,
        }
    }

    fn width(self) -> Duration {
        match self {
            Granularity::Hour => Duration::hours(1),
            Granularity::Day => Duration::days(1),
            Granularity::Week => Duration::weeks(1),
        }
    }

    /// The start of the bucket holding `at`.
    pub fn bucket_of(self, at: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Granularity::Hour => at.duration_trunc(Duration::hours(1)).unwrap_or(at),
            Granularity::Day => at.duration_trunc(Duration::days(1)).unwrap_or(at),
            Granularity::Week => {
                let day = at.duration_trunc(Duration::days(1)).unwrap_or(at);
                day - Duration::days(i64::from(day.weekday().num_days_from_monday()))
            }
        }
    }
}

/// Why a range is refused, naming the parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{parameter}: {problem}")]
pub struct RangeError {
    /// `from` or `to`.
    pub parameter: &'static str,
    /// What is wrong.
    pub problem: String,
}

/// `[from, to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TimeRange {
    /// The first instant in.
    pub from: DateTime<Utc>,
    /// The first instant out.
    pub to: DateTime<Utc>,
}

impl TimeRange {
    /// The range asked for: `to` defaults to `now`, `from` to [`DEFAULT_DAYS`] before
    /// `to`; `from` must come before `to`, at most [`MAX_DAYS`] apart.
    pub fn new(
        from: Option<DateTime<Utc>>,
        to: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<TimeRange, RangeError> {
        let to = to.unwrap_or(now);
        let from = from.unwrap_or(to - Duration::days(DEFAULT_DAYS));
        if from >= to {
            return Err(RangeError {
                parameter: "from",
                problem: "must come before `to`".to_owned(),
            });
        }
        if to - from > Duration::days(MAX_DAYS) {
            return Err(RangeError {
                parameter: "from",
                problem: format!("the range may span at most {MAX_DAYS} days"),
            });
        }
        Ok(TimeRange { from, to })
    }

    /// Whether `at` is in the range.
    pub fn holds(&self, at: DateTime<Utc>) -> bool {
        self.from <= at && at < self.to
    }

    /// Every bucket's start, in order (at most [`MAX_BUCKETS`]).
    pub fn buckets(&self, granularity: Granularity) -> Vec<DateTime<Utc>> {
        let last = granularity.bucket_of(self.to - Duration::nanoseconds(1));
        let mut at = granularity.bucket_of(self.from);
        let mut buckets = Vec::new();
        while at <= last && buckets.len() < MAX_BUCKETS {
            buckets.push(at);
            at += granularity.width();
        }
        buckets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn the_default_is_the_last_thirty_days_and_the_range_is_bounded() {
        let now = at("2026-11-26T12:00:00Z");
        let r = TimeRange::new(None, None, now).unwrap();
        assert_eq!((r.from, r.to), (at("2026-10-27T12:00:00Z"), now));
        assert!(TimeRange::new(Some(at("2016-01-01T00:00:00Z")), None, now).is_err());
        assert!(TimeRange::new(Some(now), Some(now), now).is_err());
        assert!(TimeRange::new(Some(at("2025-11-26T00:00:00Z")), Some(now), now).is_ok());
    }

    #[test]
    fn buckets_cover_the_range_and_weeks_start_on_monday() {
        let r = TimeRange::new(
            Some(at("2026-11-20T10:30:00Z")),
            Some(at("2026-11-23T00:00:00Z")),
            at("2026-11-26T00:00:00Z"),
        )
        .unwrap();
        let days = r.buckets(Granularity::Day);
        assert_eq!(days.len(), 3);
        assert_eq!(days[0], at("2026-11-20T00:00:00Z"));
        assert_eq!(days[2], at("2026-11-22T00:00:00Z"));
        let weeks = r.buckets(Granularity::Week);
        assert_eq!(weeks, vec![at("2026-11-16T00:00:00Z")]);
        assert_eq!(r.buckets(Granularity::Hour).len(), 14 + 48);
        assert_eq!(Granularity::parse("minute"), None);
    }
}
