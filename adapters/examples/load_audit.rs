//! Audit ingest under load, as ratios to the same server's bare `GET /health`
//! measured first in the same run, against the server on loopback over a real
//! database: events of one service into one chain, then spread over 50 chains (each
//! with its own `Idempotency-Key`, so every one is appended).
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/load \
//!   cargo run --release -p adapters --example load_audit -- 4000 32
//! ```
//!
//! Arguments: how many events of each kind (4000), how many in flight (32). The
//! database is migrated; use a scratch one.

mod support;

use support::load::{paired, send, serve};
use support::wrk::{Piece, Request};

#[tokio::main]
async fn main() -> Result<(), String> {
    let (total, in_flight) = support::load::args();
    let server = serve(&[]).await?;
    let base = server.base.clone();
    let service = server.service_token("load")?;
    let run = adapters::new_id();
    // Each request appends a new event (its own idempotency key: the run, the chains
    // and the request's number, unique across rounds of a load tool's threads).
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    let append = |chains: usize| {
        let round = rounds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Request::post(
            "/api/audit/events",
            vec![
                Piece::Text(format!(
                    r#"{{"action":"plugin.upload","actorId":"user-1","orgId":"org-{run}-"#
                )),
                Piece::Modulo(chains),
                Piece::Text(r#"","targetType":"plugin","targetId":"plugin-"#.to_owned()),
                Piece::Number,
                Piece::Text(r#"","details":{"version":"1.0.0","n":"#.to_owned()),
                Piece::Number,
                Piece::Text("}}".to_owned()),
            ],
            201,
        )
        .text_header("authorization", &format!("Bearer {service}"))
        .header(
            "idempotency-key",
            vec![
                Piece::Text(format!("{run}-{chains}-{round}-")),
                Piece::Number,
            ],
        )
    };
    let sizes = (total, in_flight);
    let round = |chains: usize| {
        let (request, base) = (append(chains), base.clone());
        async move { send(&base, sizes, &request).await }
    };
    let one = paired(&server.base, sizes, || round(1)).await?;
    let fifty = paired(&server.base, sizes, || round(50)).await?;
    println!("audit ingest into one chain: {}", one.line());
    println!("audit ingest over 50 chains: {}", fifty.line());
    server.stop().await;
    Ok(())
}
