-- The console's sign-in (issue 32): the browser holds an opaque id in a cookie;
-- only its SHA-256 is kept. Each console session rides on a refresh family (the
-- access tokens the console mints carry its id as `sid`), so a logout, a revoke-all
-- or a detected reuse ends it on every replica as it ends the API's sessions.
CREATE TABLE console_sessions (
    id_hash TEXT PRIMARY KEY,
    family_id TEXT NOT NULL REFERENCES refresh_families (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    email TEXT,
    generation BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX console_sessions_by_family ON console_sessions (family_id);
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);
