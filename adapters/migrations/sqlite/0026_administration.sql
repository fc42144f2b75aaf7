-- Platform administration (issue 54).

-- The organization a user acts in by default (PUT /api/me/active-organization):
-- access tokens minted afterwards carry it; `x-org-id` still wins for one request.
ALTER TABLE users ADD COLUMN active_org_id TEXT;

-- An account a super-admin disabled (it cannot sign in; its sessions and tokens
-- ended when it was), and one that must change its password before anything else
-- (created with a password set by a super-admin).
ALTER TABLE accounts ADD COLUMN disabled_at TEXT;
ALTER TABLE accounts ADD COLUMN password_change_required BIGINT NOT NULL DEFAULT 0;

-- A user's own feature flags, from the fixed catalog: `enabled` 0 takes a feature
-- away from the user, 1 opens a preview feature.
CREATE TABLE user_features (
    user_id TEXT NOT NULL,
    feature TEXT NOT NULL,
    enabled BIGINT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (user_id, feature)
);

-- A super-admin seeing what a user sees: until `expires_at` (at most 60 minutes),
-- or until ended. Its access token names it (`imp`); an ended one is refused on
-- every replica within a second (kept facts follow it).
CREATE TABLE impersonations (
    id TEXT PRIMARY KEY,
    admin_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    read_only BIGINT NOT NULL DEFAULT 0,
    started_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    ended_at TEXT,
    ended_by TEXT
);
CREATE INDEX impersonations_by_user ON impersonations (user_id, started_at);

-- A console session that sees as a user: it rides on the super-admin's own
-- sign-in family (their sign-out ends it), names the impersonation its tokens carry
-- and who started it, for the banner every page shows.
ALTER TABLE console_sessions ADD COLUMN impersonation_id TEXT;
ALTER TABLE console_sessions ADD COLUMN impersonator_id TEXT;
ALTER TABLE console_sessions ADD COLUMN impersonator TEXT;
ALTER TABLE console_sessions ADD COLUMN impersonation_read_only BIGINT NOT NULL DEFAULT 0;

-- An account root's own AI settings (PUT /api/admin/organizations/{id}/ai): the
-- providers and models it may use (`allowed`, a JSON object of provider -> models;
-- NULL: the platform's), its own provider (the key sealed enc:v2 under its data
-- key, only the last four characters kept in clear), a monthly token cap.
CREATE TABLE org_ai_settings (
    org_id TEXT PRIMARY KEY REFERENCES organizations (id),
    allowed TEXT,
    own_provider TEXT,
    own_base_url TEXT,
    own_api_key TEXT,
    own_key_hint TEXT,
    monthly_token_cap BIGINT,
    version BIGINT NOT NULL,
    updated_at TEXT NOT NULL,
    updated_by TEXT NOT NULL
);

-- The tokens an account root's generations spent, per calendar month (UTC).
CREATE TABLE org_ai_tokens (
    org_id TEXT NOT NULL,
    month TEXT NOT NULL,
    tokens BIGINT NOT NULL,
    PRIMARY KEY (org_id, month)
);

-- Organization exports, made by a background job (one replica at a time takes a
-- job by its lease): the archive is kept in chunks until `expires_at` (24 hours
-- after it is done), then forgotten.
CREATE TABLE org_exports (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    expires_at TEXT,
    size_bytes BIGINT,
    sha256 TEXT,
    holder TEXT,
    lease_until TEXT
);
CREATE INDEX org_exports_by_org ON org_exports (org_id, created_at);
CREATE INDEX org_exports_queue ON org_exports (status, created_at);
-- One export at a time per organization.
CREATE UNIQUE INDEX org_exports_one_at_a_time ON org_exports (org_id) WHERE status IN ('queued', 'running');
CREATE TABLE org_export_chunks (
    export_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (export_id, seq)
);
