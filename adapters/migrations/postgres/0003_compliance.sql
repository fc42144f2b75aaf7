-- Compliance: rules and their history, subscriptions, policies, exemptions, the check
-- log and notification preferences. A rule's full JSON form lives in `body`; the
-- columns beside it are what lists filter on.
CREATE TABLE rules (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations (id),
    name TEXT NOT NULL,
    target TEXT NOT NULL,
    severity TEXT NOT NULL,
    scope TEXT NOT NULL,
    is_template BIGINT NOT NULL DEFAULT 0,
    propagate_to_children BIGINT NOT NULL DEFAULT 0,
    tags TEXT NOT NULL,
    body TEXT NOT NULL,
    version BIGINT NOT NULL,
    deleted_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX rules_name ON rules (org_id, lower(name)) WHERE deleted_at IS NULL;
CREATE INDEX rules_org ON rules (org_id, target);
CREATE INDEX rules_scope ON rules (scope);

CREATE TABLE rule_versions (
    rule_id TEXT NOT NULL REFERENCES rules (id),
    version BIGINT NOT NULL,
    body TEXT NOT NULL,
    change TEXT NOT NULL,
    changed_by TEXT NOT NULL,
    changed_at TEXT NOT NULL,
    PRIMARY KEY (rule_id, version)
);

CREATE TABLE subscriptions (
    org_id TEXT NOT NULL REFERENCES organizations (id),
    rule_id TEXT NOT NULL REFERENCES rules (id),
    active BIGINT NOT NULL DEFAULT 0,
    pinned_version BIGINT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (org_id, rule_id)
);

CREATE TABLE policies (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations (id),
    name TEXT NOT NULL,
    description TEXT,
    rule_ids TEXT NOT NULL,
    is_template BIGINT NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX policies_name ON policies (org_id, lower(name));

CREATE TABLE exemptions (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations (id),
    rule_id TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    status TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    reviewed_by TEXT,
    review_note TEXT,
    expires_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX exemptions_entity ON exemptions (org_id, entity_id, status);

CREATE TABLE compliance_checks (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations (id),
    target TEXT NOT NULL,
    entity_id TEXT,
    result TEXT NOT NULL,
    violations TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX compliance_checks_org ON compliance_checks (org_id, created_at);

CREATE TABLE notification_preferences (
    org_id TEXT PRIMARY KEY REFERENCES organizations (id),
    email_enabled BIGINT NOT NULL,
    target_users TEXT,
    webhook_url TEXT,
    webhook_secret TEXT,
    digest_mode TEXT NOT NULL,
    notify_warnings BIGINT NOT NULL,
    updated_at TEXT NOT NULL
);

-- The last attributes validated for each entity: what re-evaluation and the impact
-- preview of a rule work from until the plugin and pipeline inventories exist.
CREATE TABLE entity_snapshots (
    org_id TEXT NOT NULL REFERENCES organizations (id),
    target TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    attributes TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (org_id, target, entity_id)
);
