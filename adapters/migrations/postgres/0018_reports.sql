-- Reporting (issue 33): pipeline execution events as the event bus delivers them,
-- and the executions derived from them.

-- Each event once, by its id; `body` is the checked event (JSON) the executions are
-- folded from again whenever one of theirs arrives.
CREATE TABLE report_events (
    id TEXT PRIMARY KEY,
    resource TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    occurred_at TEXT NOT NULL,
    body TEXT NOT NULL,
    received_at TEXT NOT NULL
);
CREATE INDEX report_events_by_execution ON report_events (resource, execution_id);

-- Executions whose events arrived and that are not derived yet: written with the
-- events, deleted by the derivation (a crash between leaves them for the worker).
CREATE TABLE report_pending (
    resource TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    queued_at TEXT NOT NULL,
    PRIMARY KEY (resource, execution_id)
);

-- Derived executions of registered pipelines (resource name to pipeline, one
-- organization); the events of other resources wait, counted, until one registers
-- them.
CREATE TABLE report_executions (
    resource TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    pipeline_id TEXT NOT NULL,
    state TEXT NOT NULL,
    outcome TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    duration_ms BIGINT,
    error TEXT,
    PRIMARY KEY (resource, execution_id)
);
CREATE INDEX report_executions_by_org ON report_executions (org_id, started_at);

CREATE TABLE report_stages (
    resource TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    org_id TEXT NOT NULL,
    pipeline_id TEXT NOT NULL,
    state TEXT NOT NULL,
    started_at TEXT NOT NULL,
    duration_ms BIGINT,
    PRIMARY KEY (resource, execution_id, stage)
);
CREATE INDEX report_stages_by_org ON report_stages (org_id, started_at);

-- Resource names whose events arrived but that map to no single organization.
CREATE TABLE report_unattributed (
    resource TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    executions BIGINT NOT NULL,
    first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL
);

-- Plugin build reports: every build attempt, written with the job's next step;
-- a claim records when the attempt began.
ALTER TABLE plugin_builds ADD COLUMN claimed_at TEXT;
CREATE TABLE plugin_build_attempts (
    id TEXT PRIMARY KEY,
    build_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    plugin_id TEXT NOT NULL,
    plugin_name TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT NOT NULL,
    duration_ms BIGINT NOT NULL,
    outcome TEXT NOT NULL,
    reason TEXT
);
CREATE INDEX plugin_build_attempts_by_org ON plugin_build_attempts (org_id, started_at);
