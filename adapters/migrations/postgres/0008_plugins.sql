-- Plugins of an organization (document 2's Plugin): unique by name and version per
-- organization; the manifest's lists as JSON text; the last compliance result as
-- JSON text; where its image build stands.
CREATE TABLE plugins (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    description TEXT,
    access_modifier TEXT NOT NULL,
    compute_type TEXT,
    is_default INTEGER NOT NULL,
    is_active INTEGER NOT NULL,
    plugin_type TEXT,
    commands TEXT NOT NULL,
    install_commands TEXT NOT NULL,
    dockerfile TEXT,
    compliance TEXT NOT NULL,
    build_status TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (org_id, name, version)
);
CREATE INDEX plugins_by_org ON plugins (org_id, created_at);

-- The archive a plugin was uploaded as (or generated into), kept for its builds: a
-- build survives a restart and runs on any replica.
CREATE TABLE plugin_archives (
    plugin_id TEXT PRIMARY KEY,
    bytes BYTEA NOT NULL
);

-- Image builds: a job per uploaded or deployed plugin, claimed by the build worker.
-- queue: tier, then dlq; status: queued, running, completed, failed, timed_out,
-- purged; attempts counted per queue; lease_until fences a claim.
CREATE TABLE plugin_builds (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    plugin_id TEXT NOT NULL,
    image TEXT NOT NULL,
    queue TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    last_error TEXT,
    last_outcome TEXT,
    run_after TEXT NOT NULL,
    lease_until TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX plugin_builds_due ON plugin_builds (status, run_after);
