-- The audit trail: one hash chain per tenant. The head row of each chain is locked by
-- every append to that chain; UNIQUE (chain_key, seq) backs the lock up.
CREATE TABLE audit_chain_heads (
    chain_key TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL,
    created_at TEXT
);

CREATE TABLE audit_events (
    id TEXT PRIMARY KEY,
    chain_key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    action TEXT NOT NULL,
    actor_id TEXT NOT NULL,
    actor_email TEXT,
    org_id TEXT NOT NULL,
    affected_org_id TEXT,
    target_type TEXT,
    target_id TEXT,
    details TEXT NOT NULL,
    outcome TEXT,
    occurred_at TEXT NOT NULL,
    created_at TEXT NOT NULL,
    service TEXT,
    idempotency_key TEXT,
    redaction_version INTEGER NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE UNIQUE INDEX audit_events_chain_seq ON audit_events (chain_key, seq);
CREATE UNIQUE INDEX audit_events_idempotency ON audit_events (idempotency_key);
CREATE INDEX audit_events_org ON audit_events (org_id, created_at);
CREATE INDEX audit_events_affected ON audit_events (affected_org_id, created_at);
CREATE INDEX audit_events_created ON audit_events (created_at);
