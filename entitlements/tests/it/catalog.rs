//! The documents' tiers and bundles, and configuration overrides.

use entitlements::*;
use Dimension::*;
use Feature::*;

#[test]
fn tiers_match_document_2() {
    let catalog = Catalog::default();
    // (tier, plugins, pipelines, seats, monthly cents, features)
    let table = [
        (Tier::Developer, 25, 5, 1, 0, vec![]),
        (
            Tier::Pro,
            50,
            10,
            1,
            4_900,
            vec![
                AiPipelineGeneration,
                AiPluginGeneration,
                BulkOperations,
                PrioritySupport,
            ],
        ),
        (
            Tier::Team,
            100,
            200,
            10,
            14_900,
            vec![
                AiPipelineGeneration,
                AiPluginGeneration,
                BulkOperations,
                AuditLog,
                PrioritySupport,
            ],
        ),
        (
            Tier::Enterprise,
            250,
            200,
            25,
            39_900,
            vec![
                AiPipelineGeneration,
                AiPluginGeneration,
                BulkOperations,
                AuditLog,
                CustomIntegrations,
                PrioritySupport,
                Sso,
            ],
        ),
    ];
    for (tier, plugins, pipelines, seats, cents, features) in table {
        let plan = catalog.plan(tier);
        assert_eq!(plan.limit(Plugins), Limit::Finite(plugins), "{tier:?}");
        assert_eq!(plan.limit(Pipelines), Limit::Finite(pipelines), "{tier:?}");
        assert_eq!(plan.limit(Seats), Limit::Finite(seats), "{tier:?}");
        for unlisted in [ApiCalls, AiCalls, Storage] {
            assert_eq!(
                plan.limit(unlisted),
                Limit::Unlimited,
                "{tier:?} {unlisted:?}"
            );
        }
        assert_eq!(plan.monthly_cents, cents);
        let mut got = plan.features.clone();
        got.sort();
        let mut want = features;
        want.sort();
        assert_eq!(got, want, "{tier:?}");
        assert_eq!(
            plan.features.contains(&Sso),
            tier == Tier::Enterprise,
            "sso: the bundle (Pro, Team) or Enterprise"
        );
    }
}

#[test]
fn bundles_match_document_3() {
    let catalog = Catalog::default();
    let all = Tier::ALL.to_vec();
    // (bundle, grant, monthly cents, annual cents, eligible, stackable)
    let table = [
        (
            BundleId::SeatPack,
            Grant::Limit {
                dimension: Seats,
                amount: 5,
            },
            2_500,
            25_000,
            all.clone(),
            true,
        ),
        (
            BundleId::PipelinePack,
            Grant::Limit {
                dimension: Pipelines,
                amount: 10,
            },
            1_500,
            15_000,
            all.clone(),
            true,
        ),
        (
            BundleId::PluginPack,
            Grant::Limit {
                dimension: Plugins,
                amount: 100,
            },
            1_500,
            15_000,
            all.clone(),
            true,
        ),
        (
            BundleId::ApiPack,
            Grant::Limit {
                dimension: ApiCalls,
                amount: 1_000_000,
            },
            2_000,
            20_000,
            all.clone(),
            true,
        ),
        (
            BundleId::AiPack,
            Grant::Limit {
                dimension: AiCalls,
                amount: 5_000,
            },
            7_500,
            75_000,
            all.clone(),
            true,
        ),
        (
            BundleId::StoragePack,
            Grant::Limit {
                dimension: Storage,
                amount: 50,
            },
            2_500,
            25_000,
            all.clone(),
            true,
        ),
        (
            BundleId::AuditLog,
            Grant::Feature { feature: AuditLog },
            2_000,
            20_000,
            vec![Tier::Pro],
            false,
        ),
        (
            BundleId::Sso,
            Grant::Feature { feature: Sso },
            4_000,
            40_000,
            vec![Tier::Pro, Tier::Team],
            false,
        ),
    ];
    for (id, grant, monthly, annual, eligible, stackable) in table {
        let b = catalog.bundle(id).unwrap();
        assert_eq!(
            (b.grant, b.monthly_cents, b.annual_cents, b.stackable),
            (grant, monthly, annual, stackable),
            "{id}"
        );
        assert_eq!(b.eligible_tiers, eligible, "{id}");
    }
    assert!(
        !catalog.bundles_enabled,
        "bundles are hidden unless enabled"
    );
    assert_eq!(SSO_IDP_CONFIGURATIONS, 5);
}

#[test]
fn overrides_apply_and_annual_follows_a_monthly_override() {
    let catalog = Catalog::from_overrides([
        ("QUOTA_TIER_DEVELOPER_PLUGINS", "30"),
        ("QUOTA_TIER_TEAM_AI_CALLS", "2000"),
        ("QUOTA_TIER_ENTERPRISE_PIPELINES", "-1"),
        ("BILLING_PLAN_PRO_MONTHLY", "5900"),
        ("BILLING_BUNDLE_SEAT_PACK_MONTHLY", "3000"),
        ("BILLING_BUNDLE_AI_PACK_MONTHLY", "8000"),
        ("BILLING_BUNDLE_AI_PACK_ANNUAL", "70000"),
        ("BILLING_BUNDLE_PLUGIN_PACK_GRANT", "150"),
        ("BILLING_BUNDLE_AUDIT_LOG_TIERS", r#"["pro", "Team"]"#),
        ("BILLING_BUNDLES_ENABLED", "TRUE"),
        ("HOME", "/root"),
    ])
    .unwrap();
    assert_eq!(
        catalog.plan(Tier::Developer).limit(Plugins),
        Limit::Finite(30)
    );
    assert_eq!(catalog.plan(Tier::Team).limit(AiCalls), Limit::Finite(2000));
    assert_eq!(
        catalog.plan(Tier::Enterprise).limit(Pipelines),
        Limit::Unlimited
    );
    assert_eq!(catalog.plan(Tier::Pro).monthly_cents, 5900);
    let seat = catalog.bundle(BundleId::SeatPack).unwrap();
    assert_eq!((seat.monthly_cents, seat.annual_cents), (3000, 30_000));
    let ai = catalog.bundle(BundleId::AiPack).unwrap();
    assert_eq!((ai.monthly_cents, ai.annual_cents), (8000, 70_000));
    assert_eq!(
        catalog.bundle(BundleId::PluginPack).unwrap().grant,
        Grant::Limit {
            dimension: Plugins,
            amount: 150
        }
    );
    assert_eq!(
        catalog.bundle(BundleId::AuditLog).unwrap().eligible_tiers,
        [Tier::Pro, Tier::Team]
    );
    assert!(catalog.bundles_enabled);
}

#[test]
fn bad_overrides_name_their_variable() {
    let cases = [
        ("BILLING_PLAN_PRO_MONTHLY", "-5"),
        ("BILLING_PLAN_GOLD_MONTHLY", "100"),
        ("BILLING_BUNDLE_SEAT_PACK_MONTHLY", "12.50"),
        ("BILLING_BUNDLE_SSO_GRANT", "3"),
        ("BILLING_BUNDLE_AUDIT_LOG_GRANT", "1"),
        ("BILLING_BUNDLE_SEAT_PACK_GRANT", "0"),
        ("BILLING_BUNDLE_SSO_TIERS", r#"["pro","platinum"]"#),
        ("BILLING_BUNDLE_SSO_TIERS", "pro,team"),
        ("BILLING_BUNDLE_MEGA_PACK_MONTHLY", "100"),
        ("BILLING_BUNDLE_SEAT_PACK_WEEKLY", "100"),
        ("BILLING_BUNDLES_ENABLED", "yes please"),
        ("QUOTA_TIER_PRO_PLUGINS", "-2"),
        ("QUOTA_TIER_PRO_WIDGETS", "5"),
        ("QUOTA_TIER_GOLD_PLUGINS", "5"),
        ("QUOTA_TIER_PRO_PLUGINS", "many"),
    ];
    for (key, value) in cases {
        let errors = Catalog::from_overrides([(key, value)]).unwrap_err();
        assert_eq!(errors.len(), 1, "{key}={value}");
        assert_eq!(errors[0].variable, key);
        assert!(errors[0].to_string().starts_with(key));
    }
    let several = Catalog::from_overrides([
        ("BILLING_PLAN_PRO_MONTHLY", "x"),
        ("QUOTA_TIER_PRO_PLUGINS", "y"),
    ])
    .unwrap_err();
    assert_eq!(several.len(), 2, "every problem is reported");
}
