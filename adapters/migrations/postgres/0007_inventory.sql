-- Pipelines of an organization (document 2's Pipeline): the create body's names in
-- columns for filtering and uniqueness, the properties as JSON text, and the last
-- compliance result (result and bounded violations) as JSON text.
CREATE TABLE pipelines (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    project TEXT NOT NULL,
    organization TEXT NOT NULL,
    pipeline_name TEXT NOT NULL,
    access_modifier TEXT NOT NULL,
    props TEXT NOT NULL,
    compliance TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (org_id, project, pipeline_name)
);
CREATE INDEX pipelines_by_org ON pipelines (org_id, created_at);

-- A cloud pipeline resource name mapped to a pipeline, per organization.
CREATE TABLE pipeline_registry (
    org_id TEXT NOT NULL,
    arn TEXT NOT NULL,
    pipeline_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (org_id, arn)
);

-- Usage of counted resources: each organization's own, and each root's pool (its
-- own usage and its teams'), checked and charged by one conditional statement in the
-- transaction of the create or delete.
CREATE TABLE quota_usage (
    org_id TEXT NOT NULL,
    dimension TEXT NOT NULL,
    used BIGINT NOT NULL,
    PRIMARY KEY (org_id, dimension)
);
CREATE TABLE quota_pool (
    root_id TEXT NOT NULL,
    dimension TEXT NOT NULL,
    used BIGINT NOT NULL,
    PRIMARY KEY (root_id, dimension)
);

-- Entities to judge again (after a mutation, or a rule change), written in the
-- transaction of the change; the re-evaluation worker claims them.
CREATE TABLE reevaluation_queue (
    id BIGSERIAL PRIMARY KEY,
    org_id TEXT NOT NULL,
    target TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX reevaluation_queue_by_org ON reevaluation_queue (org_id, id);
