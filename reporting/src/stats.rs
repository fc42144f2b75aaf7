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
    pub fn of(values: Vec<i64>) -> Option<Summary> {
        let mut counts: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
        for v in values {
            *counts.entry(v).or_default() += 1;
        }
        Summary::of_histogram(counts.into_iter().collect())
    }

    /// Summarizes a sample given as `(value, how many times)` pairs, in any order:
    /// the same summary as of the values written out (durations from second-precision
    /// event times repeat a lot, so a database sends far fewer pairs than values).
    pub fn of_histogram(mut pairs: Vec<(i64, u64)>) -> Option<Summary> {
        pairs.retain(|(_, n)| *n > 0);
        pairs.sort_unstable();
        let count: u64 = pairs.iter().map(|(_, n)| *n).sum();
        let sum: i128 = pairs
            .iter()
            .map(|(v, n)| i128::from(*v) * i128::from(*n))
            .sum();
        // The value at a 0-based rank of the written-out sample.
        let at = |rank: u64| -> Option<i64> {
            let mut seen = 0u64;
            for (value, n) in &pairs {
                seen += n;
                if rank < seen {
                    return Some(*value);
                }
            }
            None
        };
        let percentile = |hundredths: u64| -> Option<f64> {
            let scaled = hundredths * count.checked_sub(1)?;
            let (low, remainder) = (scaled / 100, i128::from(scaled % 100));
            let a = at(low)?;
            let b = if remainder > 0 { at(low + 1)? } else { a };
            Some(a as f64 + ((i128::from(b) - i128::from(a)) * remainder) as f64 / 100.0)
        };
        Some(Summary {
            count,
            min: pairs.first()?.0,
            max: pairs.last()?.0,
            mean: (sum as f64) / (count as f64),
            median: percentile(50)?,
            p95: percentile(95)?,
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

    proptest! {
        #[test]
        fn a_histogram_summarizes_as_its_values_written_out(
            values in proptest::collection::vec(0i64..50, 1..200),
        ) {
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let summary = Summary::of(values).unwrap();
            prop_assert_eq!(summary.median, percentile(&sorted, 50).unwrap());
            prop_assert_eq!(summary.p95, percentile(&sorted, 95).unwrap());
            prop_assert_eq!(summary.count as usize, sorted.len());
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
