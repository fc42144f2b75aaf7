-- Quotas and billing. The limits in force are kept on the pool rows, synchronized
-- from the effective entitlement in the transaction of every change (a bundle, a
-- tier, an override), so that a check-and-increment is one conditional UPDATE whose
-- limit is in the same row. NULL: not synchronized yet (derived on first use).
ALTER TABLE quota_pool ADD COLUMN limit_value BIGINT;
-- The period (first day of the month, UTC) that apiCalls and aiCalls count in.
ALTER TABLE quota_pool ADD COLUMN period_start TEXT;
ALTER TABLE quota_usage ADD COLUMN period_start TEXT;

-- A system admin's limit of one dimension for an account root, which a
-- synchronization keeps over the entitlement (-1 unlimited).
CREATE TABLE quota_overrides (
    org_id TEXT NOT NULL,
    dimension TEXT NOT NULL,
    limit_value BIGINT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (org_id, dimension)
);

-- A service's increment keyed by its Idempotency-Key: a retry counts once.
CREATE TABLE quota_increments (
    service TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    org_id TEXT NOT NULL,
    dimension TEXT NOT NULL,
    amount BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (service, idempotency_key)
);

-- One billing subscription per account root: its add-ons, and a version that every
-- change raises (the synchronized entitlement carries it).
CREATE TABLE billing_subscriptions (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    version BIGINT NOT NULL,
    -- Features a system admin or the billing service granted (JSON array), beside
    -- those the add-ons unlock.
    granted_features TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE billing_addons (
    subscription_id TEXT NOT NULL,
    bundle_id TEXT NOT NULL,
    quantity BIGINT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (subscription_id, bundle_id)
);

-- The platform's seat limit and purchased features (PUT /organization/{orgId}/seat-limit
-- and every entitlement synchronization); NULL seat_limit: not synchronized yet.
ALTER TABLE organizations ADD COLUMN seat_limit BIGINT;
ALTER TABLE organizations ADD COLUMN seat_features TEXT;
ALTER TABLE organizations ADD COLUMN seat_version BIGINT;
CREATE INDEX quota_pool_limited ON quota_pool (dimension) WHERE limit_value >= 0;
