//! Summaries of durations. The percentile interpolates linearly between the closest
//! ranks: for `p` in 0..1 over `n` sorted values, the rank `p * (n - 1)` (what
//! PostgreSQL's `percentile_cont` and spreadsheets' `PERCENTILE.INC` compute), so a
//! report gives the same number whichever database stored the durations.

use serde::{Deserialize, Serialize};

/// The `p` percentile (0..=1) of `sorted` values (ascending); `None` when empty.
///
/// ```
/// assert_eq!(reporting::percentile(&[10, 20, 30, 40], 0.5), Some(25.0));
/// assert_eq!(reporting::percentile(&[10, 20, 30, 40], 0.95), Some(38.5));
/// assert_eq!(reporting::percentile(&[7], 0.95), Some(7.0));
/// ```
pub fn percentile(sorted: &[i64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let p = p.clamp(0.0, 1.0);
    let rank = p * last as f64;
    let low = rank.floor() as usize;
    let high = rank.ceil() as usize;
    let (a, b) = (*sorted.get(low)?, *sorted.get(high)?);
    Some(a as f64 + (b - a) as f64 * (rank - low as f64))
}

/// A sample of durations (milliseconds), summarized.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// How many.
    pub count: u64,
    /// The shortest.
    pub min: i64,
    /// The mean.
    pub mean: f64,
    /// The median (the 0.5 percentile).
    pub median: f64,
    /// The 0.95 percentile.
    pub p95: f64,
    /// The longest.
    pub max: i64,
}

impl Summary {
    /// Summarizes `values` (sorted here); `None` when empty.
    pub fn of(mut values: Vec<i64>) -> Option<Summary> {
        values.sort_unstable();
        let count = u64::try_from(values.len()).ok()?;
        let sum: i128 = values.iter().map(|v| i128::from(*v)).sum();
        Some(Summary {
            count,
            min: *values.first()?,
            max: *values.last()?,
            mean: (sum as f64) / (count as f64),
            median: percentile(&values, 0.5)?,
            p95: percentile(&values, 0.95)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, written the long way: the value at the rank, and the share
    /// of the way to the next.
    fn reference(values: &[i64], p: f64) -> f64 {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let position = p * (sorted.len() - 1) as f64;
        let whole = position as usize;
        let fraction = position - whole as f64;
        let here = sorted[whole] as f64;
        match sorted.get(whole + 1) {
            Some(next) => here + fraction * (*next as f64 - here),
            None => here,
        }
    }

    proptest! {
        #[test]
        fn the_percentile_is_the_interpolation_between_closest_ranks(
            values in proptest::collection::vec(0i64..10_000_000, 1..300),
            p in 0.0f64..=1.0,
        ) {
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let got = percentile(&sorted, p).unwrap_or(f64::NAN);
            prop_assert!((got - reference(&values, p)).abs() < 1e-6);
            prop_assert!(got >= sorted[0] as f64 && got <= sorted[sorted.len() - 1] as f64);
        }
    }

    #[test]
    fn a_summary_of_nothing_is_none() {
        assert_eq!(Summary::of(Vec::new()), None);
        let s = Summary::of(vec![40, 10, 30, 20]).unwrap_or_else(|| panic!("a summary"));
        assert_eq!((s.count, s.min, s.max, s.mean), (4, 10, 40, 25.0));
        assert_eq!((s.median, s.p95), (25.0, 38.5));
    }
}
