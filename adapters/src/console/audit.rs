//! Audit: the organization's trail with filters; for super-admins the
//! verify-integrity action, which asks the server (`/api/audit/verify`) and has the
//! page's script check the chain itself (every hash recomputed with Web Crypto, the
//! newest signed checkpoint verified with Ed25519), and a drop zone that checks an
//! exported chain file the same way.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::api::{self, Call, Refusal};
use super::page::{self, Frame};
use super::session::Visitor;
use super::Console;
use crate::http::audit::{AuditEvent, ChainVerdict};

/// An event as a row.
pub struct EventRow {
    seq: u64,
    action: String,
    actor: String,
    target: String,
    outcome: String,
    created_at: String,
}

/// The server's verdict.
pub struct Verdict {
    ok: bool,
    count: u64,
    broken_seq: String,
    reason: String,
    checkpoint: String,
}

#[derive(Template)]
#[template(path = "console/audit.html")]
struct AuditPage {
    frame: Frame,
    events: Vec<EventRow>,
    total: u64,
    action: String,
    actor: String,
    outcome: String,
    verdict: Option<Verdict>,
    chain_url: String,
    refusal: String,
}

fn verdict_of(v: ChainVerdict) -> Verdict {
    let checkpoint = match v.checkpoints {
        Some(c @ Value::Object(_)) => c.to_string(),
        _ => String::new(),
    };
    Verdict {
        ok: v.ok,
        count: v.count,
        broken_seq: v.broken_at.map(|b| b.seq.to_string()).unwrap_or_default(),
        reason: v.reason.map(|r| r.to_string()).unwrap_or_default(),
        checkpoint,
    }
}

/// `GET /console/audit` (`verify=1`: the integrity check).
pub async fn page(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let shown = async {
        let mut frame = Frame::load(&console, &visitor, &q, ("Audit", "/console/audit")).await?;
        if frame.org.is_empty() {
            return Ok(page::empty(frame));
        }
        let get = |k: &str| q.get(k).map(|v| v.trim().to_owned()).unwrap_or_default();
        let (action, actor, outcome) = (get("action"), get("actorId"), get("outcome"));
        let mut refusal = String::new();
        let (events, total) = if frame.may("queryAudit") {
            let uri = format!(
                "/api/audit?{}",
                api::query(&[
                    ("orgId", &frame.org),
                    ("action", &action),
                    ("actorId", &actor),
                    ("outcome", &outcome),
                    ("limit", "50"),
                ])
            );
            match visitor
                .api
                .list::<AuditEvent>(&uri, Some(&frame.org), "events")
                .await
            {
                Ok(page) => (
                    page.items
                        .into_iter()
                        .map(|e| EventRow {
                            seq: e.seq,
                            actor: format!("{} {}", e.actor_email.unwrap_or_default(), e.actor_id)
                                .trim()
                                .to_owned(),
                            target: format!(
                                "{} {}",
                                e.target_type.unwrap_or_default(),
                                e.target_id.unwrap_or_default()
                            ),
                            action: e.action,
                            outcome: e.outcome.unwrap_or_default(),
                            created_at: api::instant(&e.created_at),
                        })
                        .collect(),
                    page.total,
                ),
                Err(r) if r.signed_out() => return Err(r),
                Err(r) => {
                    refusal = r.message;
                    (Vec::new(), 0)
                }
            }
        } else {
            (Vec::new(), 0)
        };
        let mut status = StatusCode::OK;
        let verdict = if get("verify") == "1" {
            let uri = format!("/api/audit/verify?{}", api::query(&[("orgId", &frame.org)]));
            match visitor.api.get::<ChainVerdict>(&uri, None).await {
                Ok(v) => Some(verdict_of(v)),
                Err(r) if r.signed_out() => return Err(r),
                Err(r) => {
                    status = frame.settle(Some(Err(r)));
                    None
                }
            }
        } else {
            None
        };
        let chain_url = format!(
            "/console/audit/chain.jsonl?{}",
            api::query(&[("org", &frame.org)])
        );
        Ok::<_, Refusal>(page::render(
            &AuditPage {
                frame,
                events,
                total,
                action,
                actor,
                outcome,
                verdict,
                chain_url,
                refusal,
            },
            status,
        ))
    };
    shown.await.unwrap_or_else(page::refused)
}

/// The API's answer at `uri` as it came, or its refusal as a page.
async fn pass_through(visitor: &Visitor, uri: &str) -> Response {
    let call = Call {
        uri,
        ..Call::default()
    };
    visitor
        .api
        .forward(call, None)
        .await
        .unwrap_or_else(page::refused)
}

/// `GET /console/audit/chain.jsonl?org=`: the chain's segment, as the API exports
/// it (super-admins).
pub async fn chain(visitor: Visitor, Query(q): Query<HashMap<String, String>>) -> Response {
    let org = q.get("org").cloned().unwrap_or_default();
    let uri = format!("/api/audit/export?{}", api::query(&[("orgId", &org)]));
    pass_through(&visitor, &uri).await
}

/// `GET /console/audit/key`: the checkpoints' verifier key, as the API gives it.
pub async fn key(visitor: Visitor) -> Response {
    pass_through(&visitor, "/api/audit/checkpoints/key").await
}
