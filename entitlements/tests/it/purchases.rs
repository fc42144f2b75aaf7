//! Effective entitlements and the purchase rules.

use entitlements::*;

fn enabled() -> Catalog {
    Catalog::from_overrides([("BILLING_BUNDLES_ENABLED", "true")]).unwrap()
}

fn with(tier: Tier, bundles: &[(BundleId, u32)]) -> Account {
    let mut account = Account::on(tier);
    account.bundles = bundles
        .iter()
        .map(|&(bundle, quantity)| AppliedBundle { bundle, quantity })
        .collect();
    account
}

#[test]
fn effective_limits_add_grants_times_quantity_with_a_breakdown() {
    let account = with(
        Tier::Team,
        &[
            (BundleId::SeatPack, 3),
            (BundleId::ApiPack, 2),
            (BundleId::PluginPack, 1),
        ],
    );
    let e = effective(&Catalog::default(), &account);
    assert_eq!(e.limit(Dimension::Seats), Limit::Finite(25));
    assert_eq!(e.limit(Dimension::Plugins), Limit::Finite(200));
    assert_eq!(
        e.limit(Dimension::ApiCalls),
        Limit::Unlimited,
        "unlimited stays unlimited"
    );
    let seats = e
        .limits
        .iter()
        .find(|l| l.dimension == Dimension::Seats)
        .unwrap();
    assert_eq!(seats.base, Limit::Finite(10));
    assert_eq!(
        seats.contributions,
        [Contribution {
            bundle: BundleId::SeatPack,
            quantity: 3,
            amount: 15
        }]
    );
    let wire = serde_json::to_value(&e).unwrap();
    assert_eq!(wire["limits"][3]["total"], -1);
}

#[test]
fn feature_bundles_union_with_the_tier() {
    let e = effective(
        &Catalog::default(),
        &with(Tier::Pro, &[(BundleId::AuditLog, 1), (BundleId::Sso, 1)]),
    );
    assert!(e.features.contains(&Feature::AuditLog) && e.features.contains(&Feature::Sso));
    assert!(e.features.contains(&Feature::BulkOperations));
    assert_eq!(
        e.purchased_features.iter().copied().collect::<Vec<_>>(),
        [Feature::AuditLog, Feature::Sso]
    );
    assert_eq!(e.idp_configurations, 5);
    // Enterprise includes SSO and its five configurations; Team has neither.
    let enterprise = effective(&Catalog::default(), &Account::on(Tier::Enterprise));
    assert!(enterprise.features.contains(&Feature::Sso));
    assert_eq!(enterprise.idp_configurations, 5);
    let team = effective(&Catalog::default(), &Account::on(Tier::Team));
    assert!(!team.features.contains(&Feature::Sso));
    assert_eq!(team.idp_configurations, 0);
}

#[test]
fn features_for_all_tiers_open_a_feature_to_developer() {
    let catalog =
        Catalog::from_overrides([("FEATURES_FOR_ALL_TIERS", "bulk_operations, audit_log")])
            .unwrap();
    let e = effective(&catalog, &Account::on(Tier::Developer));
    assert!(e.features.contains(&Feature::BulkOperations));
    assert!(e.features.contains(&Feature::AuditLog));
    assert!(!e.features.contains(&Feature::AiPipelineGeneration));
    let errors =
        Catalog::from_overrides([("FEATURES_FOR_ALL_TIERS", "bulk_operations,gold")]).unwrap_err();
    assert_eq!(errors[0].variable, "FEATURES_FOR_ALL_TIERS");
    assert!(errors[0].message.contains("gold"));
}

#[test]
fn the_system_organization_has_everything() {
    let mut system = Account::on(Tier::Developer);
    system.is_system = true;
    let e = effective(&Catalog::default(), &system);
    assert_eq!(e.features.len(), Feature::ALL.len());
    assert!(Dimension::ALL
        .iter()
        .all(|d| e.limit(*d) == Limit::Unlimited));
}

#[test]
fn every_refusal_is_typed_and_changes_nothing() {
    let catalog = enabled();
    let set = |bundle, quantity| BundleChange::Set { bundle, quantity };
    let pro = with(Tier::Pro, &[(BundleId::AuditLog, 1)]);
    let cases: Vec<(Catalog, Account, BundleChange, PurchaseError)> = vec![
        (
            Catalog::default(),
            Account::on(Tier::Pro),
            set(BundleId::SeatPack, 1),
            PurchaseError::BundlesDisabled,
        ),
        (
            catalog.clone(),
            Account {
                billing: BillingProvider::Marketplace,
                ..Account::on(Tier::Pro)
            },
            set(BundleId::SeatPack, 1),
            PurchaseError::MarketplaceManaged,
        ),
        (
            catalog.clone(),
            Account::on(Tier::Pro),
            set(BundleId::SeatPack, 0),
            PurchaseError::InvalidQuantity(0),
        ),
        (
            catalog.clone(),
            Account::on(Tier::Pro),
            set(BundleId::SeatPack, MAX_QUANTITY + 1),
            PurchaseError::InvalidQuantity(MAX_QUANTITY + 1),
        ),
        (
            catalog.clone(),
            Account::on(Tier::Pro),
            set(BundleId::Sso, 2),
            PurchaseError::NotStackable(BundleId::Sso),
        ),
        (
            catalog.clone(),
            pro.clone(),
            set(BundleId::AuditLog, 2),
            PurchaseError::NotStackable(BundleId::AuditLog),
        ),
        (
            catalog.clone(),
            Account::on(Tier::Team),
            set(BundleId::AuditLog, 1),
            PurchaseError::NotEligible {
                bundle: BundleId::AuditLog,
                tier: Tier::Team,
            },
        ),
        (
            catalog.clone(),
            Account::on(Tier::Enterprise),
            set(BundleId::Sso, 1),
            PurchaseError::NotEligible {
                bundle: BundleId::Sso,
                tier: Tier::Enterprise,
            },
        ),
        (
            catalog.clone(),
            Account::on(Tier::Developer),
            BundleChange::Remove {
                bundle: BundleId::SeatPack,
            },
            PurchaseError::NotHeld(BundleId::SeatPack),
        ),
    ];
    for (catalog, account, change, expected) in cases {
        let before = account.clone();
        assert_eq!(
            apply_change(&catalog, &account, change).unwrap_err(),
            expected,
            "{change:?}"
        );
        assert_eq!(account, before);
    }
}

#[test]
fn setting_a_held_bundle_changes_its_quantity_and_removal_takes_it_away() {
    let catalog = enabled();
    let account = with(Tier::Developer, &[(BundleId::PipelinePack, 1)]);
    let (account, e) = apply_change(
        &catalog,
        &account,
        BundleChange::Set {
            bundle: BundleId::PipelinePack,
            quantity: 4,
        },
    )
    .unwrap();
    assert_eq!(
        account.bundles,
        [AppliedBundle {
            bundle: BundleId::PipelinePack,
            quantity: 4
        }]
    );
    assert_eq!(e.limit(Dimension::Pipelines), Limit::Finite(45));
    let (account, e) = apply_change(
        &catalog,
        &account,
        BundleChange::Remove {
            bundle: BundleId::PipelinePack,
        },
    )
    .unwrap();
    assert!(account.bundles.is_empty());
    assert_eq!(e.limit(Dimension::Pipelines), Limit::Finite(5));
    // Buying the same non-stackable bundle again is the same state.
    let pro = with(Tier::Pro, &[(BundleId::Sso, 1)]);
    let (again, _) = apply_change(
        &catalog,
        &pro,
        BundleChange::Set {
            bundle: BundleId::Sso,
            quantity: 1,
        },
    )
    .unwrap();
    assert_eq!(again, pro);
}

#[test]
fn sync_payloads_carry_the_tracked_quotas_and_the_seats() {
    let e = effective(
        &Catalog::default(),
        &with(
            Tier::Pro,
            &[
                (BundleId::SeatPack, 2),
                (BundleId::Sso, 1),
                (BundleId::StoragePack, 1),
            ],
        ),
    );
    let quota = QuotaSync::new("root-1", 7, &e);
    let wire = serde_json::to_value(&quota).unwrap();
    assert_eq!(
        wire,
        serde_json::json!({"orgId": "root-1", "version": 7,
            "limits": {"plugins": 50, "pipelines": 10, "apiCalls": -1, "aiCalls": -1, "storage": -1}})
    );
    let seats = SeatLimitSync::new("root-1", 7, &e);
    assert_eq!(
        serde_json::to_value(&seats).unwrap(),
        serde_json::json!({"orgId": "root-1", "version": 7, "seats": 11, "features": ["sso"]})
    );
    assert!(
        is_newer(8, Some(7)) && !is_newer(7, Some(7)) && !is_newer(6, Some(7)) && is_newer(1, None)
    );
}
