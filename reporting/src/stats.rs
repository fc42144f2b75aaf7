//! Summaries of durations. The percentile interpolates linearly between the closest
//! ranks: for `p` in 0..1 over `n` sorted values, the rank `p * (n - 1)` (what
//! PostgreSQL's `percentile_cont` and spreadsheets' `PERCENTILE.INC` compute), so a
//! report gives the same number whichever database stored the durations.

use serde::{Deserialize, Serialize};

/// The `hundredths` percentile (0 to 100: 95 is p95) of `sorted` values
/// (ascending); `None` when empty. The rank `hundredths * (n - 1) / 100` is kept as
/// a whole part and a remainder, so no rounding of `0.95 * 3` makes a p95 of 321000
/// come out as 320999.99999999994.
///
/// ```
/// assert_eq!(reporting::percentile(&[10, 20, 30, 40], 50), Some(25.0));
/// assert_eq!(reporting::percentile(&[10, 20, 30, 40], 95), Some(38.5));
/// assert_eq!(reporting::percentile(&[30_000, 90_000, 100_000, 360_000], 95), Some(321_000.0));
/// assert_eq!(reporting::percentile(&[7], 95), Some(7.0));
/// ```
pub fn percentile(sorted: &[i64], hundredths: u32) -> Option<f64> {
    let last = u64::try_from(sorted.len().checked_sub(1)?).ok()?;
    let scaled = u64::from(hundredths.min(100)) * last;
    let low = usize::try_from(scaled / 100).ok()?;
    let remainder = i128::from(scaled % 100);
    let a = *sorted.get(low)?;
    let b = *sorted.get(low + usize::from(remainder > 0)).unwrap_or(&a);
    let step = (i128::from(b) - i128::from(a)) * remainder;
    Some(a as f64 + step as f64 / 100.0)
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
            median: percentile(&values, 50)?,
            p95: percentile(&values, 95)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, written the long way: the value at the rank, and the share
    /// of the way to the next.
    fn reference(values: &[i64], hundredths: u32) -> f64 {
        let p = f64::from(hundredths) / 100.0;
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
            p in 0u32..=100,
        ) {
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let got = percentile(&sorted, p).unwrap_or(f64::NAN);
            prop_assert!((got - reference(&values, p)).abs() < 1e-3);
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
