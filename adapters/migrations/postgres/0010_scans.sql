-- Scans: a sweep of an organization's inventory (target plugin, pipeline or all),
-- with its counts, the rule set's fingerprint, where the sweep stands (phase and the
-- last entity id flushed, after_id) and who sweeps it (holder, lease, fencing token). The
-- entities swept are those created at or before started_at.
CREATE TABLE scans (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    target TEXT NOT NULL,
    filter TEXT NOT NULL,
    status TEXT NOT NULL,
    origin TEXT NOT NULL,
    schedule_id TEXT,
    requested_by TEXT NOT NULL,
    total BIGINT NOT NULL,
    scanned BIGINT NOT NULL,
    passed BIGINT NOT NULL,
    warned BIGINT NOT NULL,
    blocked BIGINT NOT NULL,
    errors BIGINT NOT NULL,
    fingerprint TEXT,
    phase TEXT NOT NULL,
    after_id TEXT NOT NULL,
    holder TEXT,
    lease_until TEXT,
    token BIGINT NOT NULL,
    takeovers INTEGER NOT NULL,
    error TEXT,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    updated_at TEXT NOT NULL
);
CREATE INDEX scans_by_org ON scans (org_id, started_at);
CREATE INDEX scans_sweepable ON scans (status, lease_until);

-- One result per entity a scan judged: pass, warn, block or error, with the bounded
-- violations (JSON text).
CREATE TABLE scan_results (
    scan_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    target TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    entity_name TEXT NOT NULL,
    result TEXT NOT NULL,
    violations TEXT NOT NULL,
    error TEXT,
    scanned_at TEXT NOT NULL,
    PRIMARY KEY (scan_id, target, entity_id)
);
CREATE INDEX scan_results_by_result ON scan_results (scan_id, result);

-- Recurring scans: a five-field cron expression, the next time it is due.
CREATE TABLE scan_schedules (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    target TEXT NOT NULL,
    cron_expression TEXT NOT NULL,
    is_active INTEGER NOT NULL,
    next_run_at TEXT,
    last_run_at TEXT,
    last_scan_id TEXT,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX scan_schedules_by_org ON scan_schedules (org_id, created_at);
CREATE INDEX scan_schedules_due ON scan_schedules (is_active, next_run_at);

-- The sweep walks an organization's inventory by id.
CREATE INDEX pipelines_by_org_id ON pipelines (org_id, id);
CREATE INDEX plugins_by_org_id ON plugins (org_id, id);
