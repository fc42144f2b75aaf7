//! The routes of one area: The audit trail.

use super::*;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        // The audit trail.
        post("/api/audit/events", "ingestAuditEvent", Access::Service, audit::ingest)
            .doc("Append another service's event to the organization's chain; `Idempotency-Key` header required (a redelivery answers 200 with the first row)")
            .body_of::<audit::IngestEvent>()
            .idempotency_key(true)
            .answers::<audit::AuditEvent>(201),
        get("/api/audit", "queryAudit", compliance(AuditRead), audit::query)
            .doc("The organization's audit events (a super-admin may name any `orgId`)")
            .feature(Feature::AuditLog)
            .query_of::<audit::AuditQuery>()
            .paged(&["createdAt"])
            .pages::<audit::AuditEvent>("events"),
        get("/api/audit/verify", "verifyAudit", Access::SuperAdmin { step_up: false }, audit::verify)
            .doc("Verify one chain, and its signed checkpoints when they are on")
            .query_of::<audit::VerifyQuery>()
            .answers::<audit::ChainVerdict>(200),
        get("/api/audit/export", "exportAudit", Access::SuperAdmin { step_up: false }, audit::export)
            .doc("A segment of one chain as JSON lines (application/x-ndjson): the newest signed checkpoint it reaches first as `{\"checkpoint\": note}`, then its rows as stored, as `compliance audit verify` reads them")
            .query_of::<audit::ExportQuery>()
            .lines(),
        get("/api/audit/checkpoints", "listCheckpoints", Access::Org {
            from: InQuery("orgId"),
            need: Needs(AuditRead),
            step_up: false,
            counted: true,
        }, audit::checkpoints)
            .doc("The chain's signed checkpoints, newest first, and the latest")
            .feature(Feature::AuditLog)
            .paged(&["createdAt"])
            .pages_beside::<audit::Checkpoint, audit::Checkpoint>("checkpoints", "latest"),
        get("/api/audit/checkpoints/key", "checkpointKey", Access::Public, audit::checkpoint_key)
            .doc("The checkpoints' verifier key, in the signed-note form `<name>+<key id>+<base64 key>` (404 when checkpoints are off)")
            .text(),
    ]
}
