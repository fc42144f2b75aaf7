//! Sealing: one seal and one open of a webhook secret with the organization's data key
//! in hand (a replica's cached key), and an open whose data key is first unwrapped by
//! the platform key (a cold cache, without the database read). The yardstick: a plain
//! serde_json walk of a small document, measured in the same run.

// A benchmark: a panic is how it fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use adapters::keys::sealed::{self, Binding, Key, Stored};
use criterion::{black_box, criterion_group, criterion_main, Criterion};

fn bench(c: &mut Criterion) {
    let data_key = Key::generate().unwrap();
    let platform = Key::generate().unwrap();
    let binding = Binding {
        org_id: "0b3c5d7e-1f2a-4b6c-8d9e-0a1b2c3d4e5f",
        table: "notification_preferences",
        column: "webhook_secret",
        row_id: "0b3c5d7e-1f2a-4b6c-8d9e-0a1b2c3d4e5f",
    };
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let stored = sealed::seal(&data_key, 1, &binding, secret).unwrap();
    let aad = b"compliance-data-key/0b3c5d7e-1f2a-4b6c-8d9e-0a1b2c3d4e5f";
    let wrapped = platform.encrypt(aad, data_key.bytes()).unwrap();
    let document = serde_json::json!({"webhookUrl": "https://hooks.example.com/ci",
        "digestMode": "immediate", "emailEnabled": true, "notifyWarnings": false});
    let text = document.to_string();

    c.bench_function("yardstick: serde_json walk of a preference", |b| {
        b.iter(|| {
            let value: serde_json::Value = serde_json::from_str(black_box(&text)).unwrap();
            black_box(value.as_object().map(|o| o.len()))
        })
    });
    c.bench_function("seal (data key cached)", |b| {
        b.iter(|| sealed::seal(black_box(&data_key), 1, &binding, black_box(secret)).unwrap())
    });
    c.bench_function("open (data key cached)", |b| {
        b.iter(|| {
            let Ok(Stored::Sealed { body, .. }) = Stored::parse(black_box(&stored)) else {
                unreachable!()
            };
            sealed::open(&data_key, &binding, body).unwrap()
        })
    });
    c.bench_function("open (data key unwrapped by the platform key first)", |b| {
        b.iter(|| {
            let plain = platform.decrypt(aad, black_box(&wrapped)).unwrap();
            let key = Key::from_slice(&plain).unwrap();
            let Ok(Stored::Sealed { body, .. }) = Stored::parse(black_box(&stored)) else {
                unreachable!()
            };
            sealed::open(&key, &binding, body).unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
