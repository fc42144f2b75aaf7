//! Laws of the entitlement math (proptest).

use entitlements::*;
use proptest::prelude::*;

fn tier() -> impl Strategy<Value = Tier> {
    prop::sample::select(Tier::ALL.to_vec())
}

fn held() -> impl Strategy<Value = Vec<AppliedBundle>> {
    prop::collection::btree_map(prop::sample::select(BundleId::ALL.to_vec()), 1u32..50, 0..8)
        .prop_map(|m| {
            m.into_iter()
                .map(|(bundle, quantity)| AppliedBundle { bundle, quantity })
                .collect()
        })
}

fn catalog() -> impl Strategy<Value = Catalog> {
    prop::collection::vec(
        (
            tier(),
            prop::sample::select(Dimension::ALL.to_vec()),
            -1i64..1000,
        ),
        0..6,
    )
    .prop_map(|overrides| {
        let pairs: Vec<(String, String)> = overrides
            .into_iter()
            .map(|(t, d, n)| {
                (
                    format!("QUOTA_TIER_{}_{}", t.env_name(), d.env_name()),
                    n.to_string(),
                )
            })
            .chain([("BILLING_BUNDLES_ENABLED".to_owned(), "true".to_owned())])
            .collect();
        Catalog::from_overrides(pairs).unwrap()
    })
}

proptest! {
    #[test]
    fn adding_bundles_never_lowers_a_limit_and_unlimited_stays_unlimited(
        catalog in catalog(), tier in tier(), bundles in held(), extra in held(),
    ) {
        let mut account = Account::on(tier);
        account.bundles = bundles;
        let before = effective(&catalog, &account);
        for more in extra {
            match account.bundles.iter_mut().find(|b| b.bundle == more.bundle) {
                Some(b) => b.quantity = b.quantity.saturating_add(more.quantity),
                None => account.bundles.push(more),
            }
        }
        let after = effective(&catalog, &account);
        for d in Dimension::ALL {
            match (before.limit(d), after.limit(d)) {
                (Limit::Unlimited, l) => prop_assert_eq!(l, Limit::Unlimited),
                (Limit::Finite(_), Limit::Unlimited) => prop_assert!(false, "{:?} became unlimited", d),
                (Limit::Finite(a), Limit::Finite(b)) => prop_assert!(b >= a),
            }
        }
        prop_assert!(before.features.is_subset(&after.features));
    }

    #[test]
    fn the_breakdown_sums_to_the_total(catalog in catalog(), tier in tier(), bundles in held()) {
        let mut account = Account::on(tier);
        account.bundles = bundles;
        for limit in effective(&catalog, &account).limits {
            let sum: u64 = limit.contributions.iter().map(|c| c.amount).sum();
            match limit.base {
                Limit::Unlimited => prop_assert_eq!(limit.total, Limit::Unlimited),
                Limit::Finite(base) => prop_assert_eq!(limit.total, Limit::Finite(base + sum)),
            }
        }
    }

    #[test]
    fn preview_equals_purchase(catalog in catalog(), tier in tier(), bundles in held(), bundle in prop::sample::select(BundleId::ALL.to_vec()), quantity in 0u32..5) {
        let mut account = Account::on(tier);
        account.bundles = bundles;
        let change = BundleChange::Set { bundle, quantity };
        let preview = apply_change(&catalog, &account, change);
        match apply_change(&catalog, &account, change) {
            Ok((stored, committed)) => {
                prop_assert_eq!(&preview, &Ok((stored.clone(), committed.clone())));
                // What was stored, recomputed later, is what the preview showed.
                prop_assert_eq!(effective(&catalog, &stored), committed);
            }
            Err(e) => prop_assert_eq!(preview, Err(e)),
        }
    }
}
