//! Quota arithmetic.

use entitlements::*;

fn usage(used: u64, limit: Limit) -> Usage {
    Usage {
        dimension: Dimension::Plugins,
        used,
        limit,
    }
}

#[test]
fn percent_used() {
    assert_eq!(usage(20, Limit::Finite(25)).percent_used(), Some(80.0));
    assert_eq!(usage(0, Limit::Finite(0)).percent_used(), Some(100.0));
    assert_eq!(usage(5, Limit::Unlimited).percent_used(), None);
}

#[test]
fn at_risk_means_at_or_above_the_threshold_on_any_dimension() {
    let record = |id: &str, dims: Vec<Usage>| QuotaRecord {
        org_id: id.into(),
        usage: dims,
    };
    let records = vec![
        record(
            "calm",
            vec![usage(1, Limit::Finite(10)), usage(1000, Limit::Unlimited)],
        ),
        record(
            "edge",
            vec![usage(1, Limit::Finite(10)), usage(9, Limit::Finite(10))],
        ),
        record("over", vec![usage(12, Limit::Finite(10))]),
    ];
    let ids: Vec<&str> = at_risk(&records, 90.0).map(|r| r.org_id.as_str()).collect();
    assert_eq!(ids, ["edge", "over"]);
}

#[test]
fn increments_are_capped_per_call_and_by_the_limit() {
    assert_eq!(check_increment(10, Limit::Finite(1010), 1000), Ok(1010));
    assert_eq!(
        check_increment(10, Limit::Unlimited, 1001),
        Err(QuotaError::IncrementTooLarge(1001))
    );
    assert_eq!(
        check_increment(10, Limit::Unlimited, 0),
        Err(QuotaError::ZeroIncrement)
    );
    assert_eq!(
        check_increment(10, Limit::Finite(10), 1),
        Err(QuotaError::Exceeded {
            used: 10,
            limit: 10,
            requested: 1
        })
    );
    assert_eq!(
        check_increment(u64::MAX - 1, Limit::Unlimited, 5),
        Ok(u64::MAX)
    );
}

#[test]
fn teams_draw_from_the_roots_pool() {
    // Two teams of a root with a pooled cap of 10.
    let (team_a, pool) = check_pooled_increment(0, 0, Limit::Finite(10), 6).unwrap();
    let (team_b, pool) = check_pooled_increment(0, pool, Limit::Finite(10), 4).unwrap();
    assert_eq!((team_a, team_b, pool), (6, 4, 10));
    assert!(
        check_pooled_increment(team_b, pool, Limit::Finite(10), 1).is_err(),
        "the pool is shared"
    );
}
