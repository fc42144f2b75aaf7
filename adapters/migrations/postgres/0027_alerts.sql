-- Dashboards and alerts over the reports (issue 56).

-- A dashboard: a title and at most 24 panels (JSON: kind, report, params,
-- position). `version` is raised by each change; a write carrying an older one is
-- refused (no lost update).
CREATE TABLE dashboards (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    title TEXT NOT NULL,
    panels TEXT NOT NULL,
    version BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX dashboards_by_org ON dashboards (org_id, created_at);

-- Where alerts go: `email`, `slack`, `webhook` or `pagerduty`. `settings` holds
-- what is not secret (addresses, the secret's hint); `secret` the URL with its
-- token, the routing key or the signing secret, sealed under the organization's key.
CREATE TABLE alert_destinations (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    settings TEXT NOT NULL,
    secret TEXT,
    version BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX alert_destinations_name ON alert_destinations (org_id, lower(name));

-- An alert rule (`body`: its metric, parameters, thresholds and timings as JSON)
-- and where it stands (`state`, and `tracker`: what the evaluation remembers).
-- `evaluations` is raised by each evaluation that changed something: the next one
-- is written only where it still reads the number it started from, so two
-- evaluators never both write a transition.
CREATE TABLE alert_rules (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    paused BIGINT NOT NULL DEFAULT 0,
    version BIGINT NOT NULL,
    state TEXT NOT NULL,
    tracker TEXT NOT NULL,
    evaluations BIGINT NOT NULL DEFAULT 0,
    notices BIGINT NOT NULL DEFAULT 0,
    next_evaluation_at TEXT NOT NULL,
    last_evaluated_at TEXT,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX alert_rules_name ON alert_rules (org_id, lower(name));
CREATE INDEX alert_rules_due ON alert_rules (next_evaluation_at);
CREATE INDEX alert_rules_by_state ON alert_rules (org_id, state);

-- The destinations of each rule (a destination in use cannot be deleted).
CREATE TABLE alert_rule_destinations (
    rule_id TEXT NOT NULL,
    destination_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    PRIMARY KEY (rule_id, destination_id)
);
CREATE INDEX alert_rule_destinations_by_destination ON alert_rule_destinations (destination_id);

-- Every transition of a rule, with its value and the notification it made (whose
-- deliveries and their attempts are the notification log's).
CREATE TABLE alert_history (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    rule_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    at TEXT NOT NULL,
    from_state TEXT NOT NULL,
    to_state TEXT NOT NULL,
    value TEXT,
    notice TEXT,
    notification_id TEXT,
    UNIQUE (rule_id, seq)
);

-- Tests of destinations per organization and minute (counted in one statement).
CREATE TABLE alert_test_windows (
    org_id TEXT NOT NULL,
    minute TEXT NOT NULL,
    tests BIGINT NOT NULL,
    PRIMARY KEY (org_id, minute)
);

-- An organization's posture at an instant (hourly, and at the end of each scan),
-- kept for REPORT_RETENTION_DAYS: the trend of blocked and warned entities.
CREATE TABLE posture_snapshots (
    org_id TEXT NOT NULL,
    at TEXT NOT NULL,
    cause TEXT NOT NULL,
    total BIGINT NOT NULL,
    pass BIGINT NOT NULL,
    warn BIGINT NOT NULL,
    block BIGINT NOT NULL,
    error BIGINT NOT NULL,
    PRIMARY KEY (org_id, at)
);
CREATE INDEX posture_snapshots_by_time ON posture_snapshots (at);

-- The built-in Admin and Super Admin Roles write dashboards and alerts.
UPDATE roles SET permissions = (permissions::jsonb || '["dashboards:write"]'::jsonb)::text
 WHERE built_in = 1 AND name IN ('Admin', 'Super Admin')
   AND NOT (permissions::jsonb ? 'dashboards:write');
UPDATE roles SET permissions = (permissions::jsonb || '["alerts:write"]'::jsonb)::text
 WHERE built_in = 1 AND name IN ('Admin', 'Super Admin')
   AND NOT (permissions::jsonb ? 'alerts:write');
