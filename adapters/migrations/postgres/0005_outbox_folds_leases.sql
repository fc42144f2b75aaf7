-- The audit outbox: the server's own audit events, written in the transaction of the
-- change they record, then chained in order by the relay (which deletes each row in
-- the transaction that appends it).
CREATE TABLE audit_outbox (
    id BIGSERIAL PRIMARY KEY,
    event TEXT NOT NULL,
    created_at TEXT NOT NULL
);

-- Denials folded per actor, organization and minute: one authz.denied event each,
-- with the count, written to the outbox once the minute is over.
CREATE TABLE denial_folds (
    actor_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    minute TEXT NOT NULL,
    count BIGINT NOT NULL,
    event TEXT NOT NULL,
    last_at TEXT NOT NULL,
    PRIMARY KEY (actor_id, org_id, minute)
);

-- Leases for singleton work: taken by a conditional upsert, renewed while held; the
-- token grows with every change of holder (a fencing token).
CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    token BIGINT NOT NULL
);
