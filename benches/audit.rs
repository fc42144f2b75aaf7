//! audit-chain: sealing and verifying ~500-byte events, against raw SHA-256 over
//! the same bytes (the floor any verifier pays).

use audit_chain::{seal, ChainHead, ChainVerifier, SealedEvent};
use benches::audit_event;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use sha2::{Digest, Sha256};

const CHAIN: u64 = 1_000;

fn chain() -> Vec<SealedEvent> {
    let mut head = ChainHead::genesis("org-acme");
    let now = audit_event(0).occurred_at;
    (0..CHAIN)
        .filter_map(|i| {
            let (row, next) = seal(&head, audit_event(i), now).ok()?;
            head = next;
            Some(row)
        })
        .collect()
}

fn audit(c: &mut Criterion) {
    let rows = chain();
    let bytes: Vec<Vec<u8>> = rows
        .iter()
        .map(|r| [r.prev_hash.as_bytes(), r.canonical_json().as_bytes()].concat())
        .collect();
    let mean = bytes.iter().map(Vec::len).sum::<usize>() / bytes.len().max(1);
    eprintln!("canonical bytes hashed per event (with prevHash): {mean}");

    let mut group = c.benchmark_group("audit");
    group.throughput(Throughput::Elements(CHAIN));
    let events: Vec<_> = (0..CHAIN).map(audit_event).collect();
    let now = audit_event(0).occurred_at;
    group.bench_function("seal_1000", |b| {
        b.iter_batched(
            || events.clone(),
            |events| {
                let mut head = ChainHead::genesis("org-acme");
                for event in events {
                    if let Ok((_, next)) = seal(&head, event, now) {
                        head = next;
                    }
                }
                head
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.bench_function("verify_1000", |b| {
        b.iter(|| {
            let mut verifier = ChainVerifier::new();
            for row in black_box(&rows) {
                verifier.push(row);
            }
            verifier.finish().ok
        })
    });
    group.bench_function("raw_sha256_1000", |b| {
        b.iter(|| {
            let mut last = [0u8; 32];
            for input in black_box(&bytes) {
                last = Sha256::digest(input).into();
            }
            last
        })
    });
    group.finish();
}

criterion_group!(benches, audit);
criterion_main!(benches);
