-- Sign-in (issue 31): accounts that sign in with a password, their e-mail
-- verification, refresh-token families that rotate, personal access tokens, and the
-- failures that throttle sign-in. Secrets are stored as hashes only: passwords as
-- argon2id PHC strings, tokens (high-entropy) as SHA-256 hex.

-- One account per user who signs in here (users seen only in outside tokens have
-- none). `generation` rises with every revoke-all, password change and deletion: an
-- access token issued under an older one fails at once, on every replica.
CREATE TABLE accounts (
    user_id TEXT PRIMARY KEY REFERENCES users (id),
    email TEXT NOT NULL,
    name TEXT,
    password_hash TEXT NOT NULL,
    email_verified_at TEXT,
    generation BIGINT NOT NULL DEFAULT 0,
    revoked_at TEXT,
    deleted_at TEXT,
    -- An authenticator for step-up (base32, sealed with SECRETS_ENCRYPTION_KEY when
    -- set): the one confirmed, the one waiting for its first code, and the step of
    -- the last code used (a code is good once).
    totp_secret TEXT,
    totp_pending TEXT,
    totp_last_step BIGINT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
-- A deleted account frees its address.
CREATE UNIQUE INDEX accounts_email ON accounts (email) WHERE deleted_at IS NULL;

-- Link tokens sent by e-mail.
CREATE TABLE email_verifications (
    token_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    email TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX email_verifications_by_user ON email_verifications (user_id);

-- Mail to an account (the verification link), sent by the account-mail worker with
-- retries; the body is cleared once sent.
CREATE TABLE account_mail (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    recipient TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    run_after TEXT NOT NULL,
    lease_until TEXT,
    last_error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX account_mail_due ON account_mail (status, run_after);

-- A sign-in's refresh tokens form a family; each token is used once.
CREATE TABLE refresh_families (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    org_id TEXT,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    revoked_at TEXT,
    revoked_reason TEXT
);
CREATE INDEX refresh_families_by_user ON refresh_families (user_id);

CREATE TABLE refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    family_id TEXT NOT NULL REFERENCES refresh_families (id) ON DELETE CASCADE,
    issued_at TEXT NOT NULL,
    used_at TEXT
);
CREATE INDEX refresh_tokens_by_family ON refresh_tokens (family_id);

CREATE TABLE personal_tokens (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    hint TEXT NOT NULL,
    org_id TEXT,
    permissions TEXT,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at TEXT
);
CREATE INDEX personal_tokens_by_user ON personal_tokens (user_id, created_at);

-- Failed sign-ins per key (`account:<email>` or `address:<ip>`): a run's count, its
-- first and latest failure. Rows past the lockout are pruned by retention.
CREATE TABLE signin_failures (
    key TEXT PRIMARY KEY,
    failures INTEGER NOT NULL,
    first_at TEXT NOT NULL,
    last_at TEXT NOT NULL
);

-- What every request checks about its credential (the account's generation and
-- deletion, a session's family, a personal access token) is kept per replica and
-- follows changes on every replica, like the gate's facts. Per row, so that a
-- statement that changes nothing (revoking a token that is not there) tells nobody;
-- PostgreSQL folds a transaction's identical notifications into one.
CREATE TRIGGER accounts_facts AFTER UPDATE OF generation, deleted_at OR DELETE ON accounts
  FOR EACH ROW EXECUTE FUNCTION compliance_facts_changed();
CREATE TRIGGER refresh_families_facts AFTER UPDATE OF revoked_at OR DELETE ON refresh_families
  FOR EACH ROW EXECUTE FUNCTION compliance_facts_changed();
CREATE TRIGGER personal_tokens_facts AFTER UPDATE OF revoked_at OR DELETE ON personal_tokens
  FOR EACH ROW EXECUTE FUNCTION compliance_facts_changed();
