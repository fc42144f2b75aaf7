//! `/audit`: ingest from services, the query for admins, and chain verification.

use audit_chain::SealedEvent;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::http::error::ApiError;
use crate::http::extract::{PageParams, Query, RawBody, SortOrder};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Paged};
use crate::http::state::{AppState, ServiceCaller};
use crate::services::audit::{self, AuditFilter, ChainReport, CheckpointRecord};

/// A sealed audit event as the API answers it: the event after redaction, with its
/// place in its chain.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub id: String,
    /// 1, 2, 3... within the chain.
    pub seq: u64,
    /// `affectedOrgId` if set, else `orgId`.
    pub chain_key: String,
    pub action: String,
    pub actor_id: String,
    pub actor_email: Option<String>,
    pub org_id: String,
    pub affected_org_id: Option<String>,
    pub target_type: Option<String>,
    pub target_id: Option<String>,
    /// Context, redacted.
    pub details: Value,
    pub outcome: Option<String>,
    pub occurred_at: DateTime<Utc>,
    /// Ingest time; never decreases along a chain.
    pub created_at: DateTime<Utc>,
    pub service: Option<String>,
    pub idempotency_key: Option<String>,
    /// The version of the redaction rules applied.
    pub redaction_version: u32,
    /// 64 zeros for the first row of a chain.
    pub prev_hash: String,
    /// Lowercase hex SHA-256 of `prevHash` followed by the canonical JSON.
    pub hash: String,
}

impl From<SealedEvent> for AuditEvent {
    fn from(e: SealedEvent) -> Self {
        AuditEvent {
            id: e.id,
            seq: e.seq,
            chain_key: e.chain_key,
            action: e.action,
            actor_id: e.actor_id,
            actor_email: e.actor_email,
            org_id: e.org_id,
            affected_org_id: e.affected_org_id,
            target_type: e.target_type,
            target_id: e.target_id,
            details: e.details,
            outcome: e.outcome,
            occurred_at: e.occurred_at,
            created_at: e.created_at,
            service: e.service,
            idempotency_key: e.idempotency_key,
            redaction_version: e.redaction_version,
            prev_hash: e.prev_hash,
            hash: e.hash,
        }
    }
}

/// A signed checkpoint of a chain.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    pub chain_key: String,
    /// The chain's last seq when signed.
    pub seq: u64,
    /// Its head hash then.
    pub hash: String,
    pub signed_at: DateTime<Utc>,
    /// The signed note (C2SP signed-note, Ed25519).
    pub note: String,
}

impl From<CheckpointRecord> for Checkpoint {
    fn from(c: CheckpointRecord) -> Self {
        Checkpoint {
            chain_key: c.chain_key,
            seq: c.seq,
            hash: c.hash,
            signed_at: c.signed_at,
            note: c.note,
        }
    }
}

/// A chain's verification: `ok` only when the chain and its checkpoints hold.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChainVerdict {
    pub ok: bool,
    /// The first row that fails.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken_at: Option<AuditEvent>,
    /// Why it fails (`{kind}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Value>,
    /// Rows checked (up to and including the broken one).
    pub count: u64,
    /// The first surviving row's seq.
    pub first_seq: Option<u64>,
    /// The last row checked.
    pub last_seq: Option<u64>,
    /// The hash of the last intact row.
    pub head_hash: Option<String>,
    /// The chain against its signed checkpoints, when they are on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<Value>,
}

impl From<ChainReport> for ChainVerdict {
    fn from(r: ChainReport) -> Self {
        let chain = r.chain;
        ChainVerdict {
            ok: r.ok,
            broken_at: chain.broken_at.map(AuditEvent::from),
            reason: chain
                .reason
                .and_then(|reason| serde_json::to_value(reason).ok()),
            count: chain.count,
            first_seq: chain.first_seq,
            last_seq: chain.last_seq,
            head_hash: chain.head_hash,
            checkpoints: r
                .checkpoints
                .and_then(|verdict| serde_json::to_value(verdict).ok()),
        }
    }
}

/// Another service's event for the organization's chain.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct IngestEvent {
    /// On the remote allow-list.
    #[schema(max_length = 100)]
    action: String,
    #[schema(min_length = 1, max_length = 200)]
    actor_id: String,
    actor_email: Option<String>,
    #[schema(min_length = 1, max_length = 200)]
    org_id: String,
    affected_org_id: Option<String>,
    target_type: Option<String>,
    target_id: Option<String>,
    #[serde(default)]
    details: Value,
    outcome: Option<String>,
    occurred_at: Option<DateTime<Utc>>,
    service: Option<String>,
}

/// `POST /audit/events`: service tokens only; the action must be on the remote
/// allow-list; `Idempotency-Key` required. A new event answers 201, a redelivery 200
/// with the row stored the first time.
pub(crate) async fn ingest(
    State(state): State<AppState>,
    caller: ServiceCaller,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Answer<AuditEvent>, ApiError> {
    // Integers beyond ±2^53 become strings before a parser can make floats of them.
    let text =
        std::str::from_utf8(&body).map_err(|_| ApiError::validation("the body is not UTF-8"))?;
    let body: IngestEvent = serde_json::from_str(&audit_chain::quote_unsafe_integers(text))
        .map_err(|e| ApiError::validation(format!("invalid body: {e}")))?;
    let key = crate::http::extract::idempotency_key(&headers)?.ok_or_else(|| {
        ApiError::invalid_field(
            "Idempotency-Key",
            "the header is required (1 to 200 characters)",
        )
    })?;
    if body.service.as_deref().is_some_and(|s| s != caller.service) {
        return Err(ApiError::invalid_field(
            "service",
            "must be the service named by the token",
        ));
    }
    for (field, value) in [("actorId", &body.actor_id), ("orgId", &body.org_id)] {
        if value.trim().is_empty() || value.len() > 200 {
            return Err(ApiError::invalid_field(
                field,
                "must be 1 to 200 characters",
            ));
        }
    }
    let now = Utc::now();
    let event = audit_chain::AuditEvent {
        id: crate::new_id(),
        action: body.action,
        actor_id: body.actor_id,
        actor_email: body.actor_email,
        org_id: body.org_id,
        affected_org_id: body.affected_org_id.filter(|a| !a.is_empty()),
        target_type: body.target_type,
        target_id: body.target_id,
        details: body.details,
        outcome: body.outcome,
        occurred_at: body.occurred_at.unwrap_or(now),
        service: Some(caller.service),
        idempotency_key: Some(key),
    };
    let (row, new) = audit::ingest(&state.infra.store, &state.replica.appender, event).await?;
    Ok(if new {
        Answer::created(row.into())
    } else {
        Answer::ok(row.into())
    })
}

/// Filters of `GET /audit`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct AuditQuery {
    org_id: Option<String>,
    action: Option<String>,
    actor_id: Option<String>,
    target_type: Option<String>,
    target_id: Option<String>,
    outcome: Option<String>,
    #[param(value_type = Option<String>, format = DateTime)]
    from: Option<String>,
    #[param(value_type = Option<String>, format = DateTime)]
    to: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

fn instant(field: &str, value: Option<&str>) -> Result<Option<DateTime<Utc>>, ApiError> {
    value
        .map(|v| {
            DateTime::parse_from_rfc3339(v)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| ApiError::invalid_field(field, "must be an RFC 3339 time"))
        })
        .transpose()
}

/// `GET /audit` (`audit:read` in the `x-org-id` organization): an organization's
/// admins see its events (its own and those operated on it); a super-admin may name
/// any organization with `orgId`, or none for all.
pub(crate) async fn query(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<AuditQuery>,
) -> Result<Paged<AuditEvent>, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let org_id = granted.org.id.clone();
    let filter = AuditFilter {
        org_id: if granted.super_admin {
            q.org_id
        } else {
            Some(org_id)
        },
        action: q.action,
        actor_id: q.actor_id,
        target_type: q.target_type,
        target_id: q.target_id,
        outcome: q.outcome,
        from: instant("from", q.from.as_deref())?,
        to: instant("to", q.to.as_deref())?,
    };
    let ascending = page.sort_order == SortOrder::Asc;
    let (events, total) = audit::query(
        &state.infra.store,
        &filter,
        (page.limit, page.offset, ascending),
    )
    .await?;
    let events = events.into_iter().map(AuditEvent::from).collect();
    Ok(Paged::new("events", events, total, page))
}

/// The query of `GET /audit/verify`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct VerifyQuery {
    #[param(required = true, min_length = 1, max_length = 200)]
    org_id: Option<String>,
}

/// `GET /audit/verify?orgId=` (super-admin): the chain streamed through the verifier.
pub(crate) async fn verify(
    State(state): State<AppState>,
    Query(q): Query<VerifyQuery>,
) -> Result<Answer<ChainVerdict>, ApiError> {
    let chain = q
        .org_id
        .filter(|o| !o.trim().is_empty())
        .ok_or_else(|| ApiError::invalid_field("orgId", "is required"))?;
    let verifier = state
        .config
        .checkpoints
        .as_ref()
        .map(|c| c.signer.verifier());
    let verification = audit::verify_chain(&state.infra.store, &chain, verifier.as_ref()).await?;
    Ok(Answer::ok(verification.into()))
}

/// The query of `GET /audit/export`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct ExportQuery {
    /// The chain (an organization's id).
    #[param(required = true, min_length = 1, max_length = 200)]
    org_id: Option<String>,
    /// The last seq before the segment (0: from the start).
    #[param(value_type = Option<u64>, minimum = 0)]
    after: Option<String>,
    /// Rows in the segment, 1 to 10,000 (10,000).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 10000)]
    limit: Option<String>,
}

/// `GET /audit/export`: a segment of one chain as JSON lines, the newest signed
/// checkpoint it reaches first (`{"checkpoint": note}`), then its rows as stored;
/// what `compliance audit verify` and the console's in-browser check read.
pub(crate) async fn export(
    State(state): State<AppState>,
    Query(q): Query<ExportQuery>,
) -> Result<Response, ApiError> {
    let chain = q
        .org_id
        .filter(|o| !o.trim().is_empty())
        .ok_or_else(|| ApiError::invalid_field("orgId", "is required"))?;
    let after = match q.after.as_deref() {
        None => 0,
        Some(text) => text
            .parse::<u64>()
            .map_err(|_| ApiError::invalid_field("after", "must be a whole number"))?,
    };
    let limit = match q.limit.as_deref() {
        None => audit::MAX_EXPORT_SEGMENT,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=audit::MAX_EXPORT_SEGMENT).contains(n))
            .ok_or_else(|| {
                ApiError::invalid_field("limit", "must be a whole number from 1 to 10000")
            })?,
    };
    let (note, rows) = audit::export_segment(&state.infra.store, &chain, after, limit).await?;
    let mut out = String::new();
    if let Some(note) = note {
        out.push_str(&serde_json::json!({ "checkpoint": note }).to_string());
        out.push('\n');
    }
    for row in &rows {
        let line = serde_json::to_string(row).map_err(|e| ApiError::internal(e.to_string()))?;
        out.push_str(&line);
        out.push('\n');
    }
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/x-ndjson")],
        out,
    )
        .into_response())
}

/// The query of `GET /audit/checkpoints`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct CheckpointQuery {
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// `GET /audit/checkpoints?orgId=` (`audit:read` in that organization, or a
/// super-admin): its chain's latest checkpoint and the history, newest first.
pub(crate) async fn checkpoints(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<CheckpointQuery>,
) -> Result<Paged<Checkpoint>, ApiError> {
    // Newest first: checkpoints are signed in seq order, so createdAt and seq agree.
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total, latest) =
        audit::checkpoints(&state.infra.store, &granted.org.id, page.limit, page.offset).await?;
    let items = items.into_iter().map(Checkpoint::from).collect();
    let latest = latest.map(Checkpoint::from);
    Ok(Paged::new("checkpoints", items, total, page).beside("latest", latest))
}

/// `GET /audit/checkpoints/key`: the verifier key of the checkpoints, in the
/// signed-note form (`<name>+<key id>+<base64 key>`), as plain text; 404 when
/// checkpoints are off.
pub(crate) async fn checkpoint_key(State(state): State<AppState>) -> Result<Response, ApiError> {
    let settings = state
        .config
        .checkpoints
        .as_ref()
        .ok_or_else(|| ApiError::not_found("checkpoint key"))?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; charset=utf-8",
        )],
        format!("{}\n", settings.signer.verifier_key()),
    )
        .into_response())
}
