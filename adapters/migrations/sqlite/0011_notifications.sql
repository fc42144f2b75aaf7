-- Notifications: written in the transaction of the check (or scan, or announcement)
-- that caused them, with one delivery per channel; the delivery worker sends them.
-- kind: check.block, check.warn, scan.block, announcement, digest.
CREATE TABLE notifications (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX notifications_by_org ON notifications (org_id, created_at);

-- One delivery per notification and channel (inbox, email, webhook). status:
-- pending (due at run_after), held (waiting for its digest window), sent, failed
-- (attempts exhausted), skipped (nothing to send it with), digested (sent in a
-- digest), disabled (the receiver answered 410).
CREATE TABLE deliveries (
    id TEXT PRIMARY KEY,
    notification_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    run_after TEXT NOT NULL,
    lease_until TEXT,
    digest_window TEXT,
    digest_id TEXT,
    last_error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (notification_id, channel)
);
CREATE INDEX deliveries_due ON deliveries (status, run_after);
CREATE INDEX deliveries_held ON deliveries (status, org_id, channel, digest_window);

-- One digest per organization, channel and window, whatever the number of replicas.
CREATE TABLE digests (
    org_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    digest_window TEXT NOT NULL,
    notification_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (org_id, channel, digest_window)
);

-- Every delivery attempt.
CREATE TABLE notification_log (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    notification_id TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    response_status INTEGER,
    error TEXT,
    at TEXT NOT NULL
);
CREATE INDEX notification_log_by_org ON notification_log (org_id, at);

-- The organization's inbox.
CREATE TABLE messages (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    notification_id TEXT UNIQUE,
    created_by TEXT NOT NULL,
    read_at TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX messages_by_org ON messages (org_id, created_at);

-- A webhook that answered 410 Gone is off until its URL is saved again.
ALTER TABLE notification_preferences ADD COLUMN webhook_disabled_at TEXT;
