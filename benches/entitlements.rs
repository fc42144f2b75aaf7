//! entitlements: an account's effective entitlement with five bundles, and the
//! at-risk test over 10,000 quota records.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use entitlements::*;

fn bench(c: &mut Criterion) {
    let catalog = Catalog::default();
    let mut account = Account::on(Tier::Pro);
    account.bundles = [
        (BundleId::SeatPack, 3),
        (BundleId::PipelinePack, 2),
        (BundleId::PluginPack, 1),
        (BundleId::ApiPack, 4),
        (BundleId::Sso, 1),
    ]
    .into_iter()
    .map(|(bundle, quantity)| AppliedBundle { bundle, quantity })
    .collect();
    c.bench_function("entitlements/effective_5_bundles", |b| {
        b.iter(|| effective(black_box(&catalog), black_box(&account)))
    });

    let records: Vec<QuotaRecord> = (0..10_000u64)
        .map(|i| QuotaRecord {
            org_id: format!("org-{i}"),
            usage: vec![
                Usage {
                    dimension: Dimension::Plugins,
                    used: i % 60,
                    limit: Limit::Finite(50),
                },
                Usage {
                    dimension: Dimension::Pipelines,
                    used: i % 11,
                    limit: Limit::Finite(10),
                },
                Usage {
                    dimension: Dimension::ApiCalls,
                    used: i * 97,
                    limit: Limit::Finite(1_000_000),
                },
                Usage {
                    dimension: Dimension::AiCalls,
                    used: i,
                    limit: Limit::Unlimited,
                },
            ],
        })
        .collect();
    c.bench_function("entitlements/at_risk_10000_records", |b| {
        b.iter(|| at_risk(black_box(&records), 90.0).count())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
