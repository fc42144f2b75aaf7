-- Single sign-on per root organization with OpenID Connect (issue 53).

-- An identity-provider configuration: at most five per root organization. The client
-- secret is sealed under the organization's data key (enc:v2), never answered.
-- `scopes`, `role_mappings` and `domains` are JSON arrays.
CREATE TABLE org_idp_configs (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations (id),
    name TEXT NOT NULL,
    issuer TEXT NOT NULL,
    client_id TEXT NOT NULL,
    client_secret TEXT NOT NULL,
    scopes TEXT NOT NULL,
    groups_claim TEXT NOT NULL,
    role_mappings TEXT NOT NULL,
    default_role TEXT NOT NULL,
    domains TEXT NOT NULL,
    jit_provisioning INTEGER NOT NULL DEFAULT 0,
    enabled INTEGER NOT NULL DEFAULT 1,
    version INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (org_id, name)
);
CREATE INDEX org_idp_configs_by_org ON org_idp_configs (org_id);

-- An e-mail domain an organization claims, proven by a TXT record carrying `token`.
-- A domain is verified by one organization at most.
CREATE TABLE org_domains (
    org_id TEXT NOT NULL REFERENCES organizations (id),
    domain TEXT NOT NULL,
    token TEXT NOT NULL,
    created_at TEXT NOT NULL,
    verified_at TEXT,
    checked_at TEXT,
    PRIMARY KEY (org_id, domain)
);
CREATE UNIQUE INDEX org_domains_verified_once ON org_domains (domain) WHERE verified_at IS NOT NULL;

-- Whether an organization requires its single sign-on, from when (after a grace).
CREATE TABLE org_sso_policies (
    org_id TEXT PRIMARY KEY REFERENCES organizations (id),
    required INTEGER NOT NULL DEFAULT 0,
    enforce_from TEXT,
    updated_at TEXT NOT NULL
);

-- Accounts that keep password access while an organization requires SSO, each only
-- until `armed_until` (at most 30 days; two at once).
CREATE TABLE org_break_glass (
    org_id TEXT NOT NULL REFERENCES organizations (id),
    user_id TEXT NOT NULL,
    armed_until TEXT NOT NULL,
    armed_by TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (org_id, user_id)
);

-- An identity is (configuration, issuer, subject), never the e-mail.
CREATE TABLE sso_identities (
    config_id TEXT NOT NULL REFERENCES org_idp_configs (id) ON DELETE CASCADE,
    issuer TEXT NOT NULL,
    subject TEXT NOT NULL,
    user_id TEXT NOT NULL,
    linked_at TEXT NOT NULL,
    last_sign_in_at TEXT NOT NULL,
    PRIMARY KEY (config_id, issuer, subject)
);
CREATE INDEX sso_identities_by_user ON sso_identities (user_id);

-- A sign-in started at a provider: single use, bound to the browser's cookie (its
-- hash), ten minutes. The PKCE verifier and the nonce stay here, never in a URL.
CREATE TABLE sso_attempts (
    state_hash TEXT PRIMARY KEY,
    config_id TEXT NOT NULL,
    browser_hash TEXT NOT NULL,
    nonce TEXT NOT NULL,
    pkce_verifier TEXT NOT NULL,
    return_to TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at TEXT
);
CREATE INDEX sso_attempts_by_expiry ON sso_attempts (expires_at);

-- An identity waiting to be linked to the account with its e-mail: linked when that
-- account's password is given with the token (single use, ten minutes).
CREATE TABLE sso_pending_links (
    token_hash TEXT PRIMARY KEY,
    config_id TEXT NOT NULL REFERENCES org_idp_configs (id) ON DELETE CASCADE,
    issuer TEXT NOT NULL,
    subject TEXT NOT NULL,
    user_id TEXT NOT NULL,
    groups TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at TEXT
);

-- The root organization whose single sign-on issued a session, and a token made in
-- such a session.
ALTER TABLE refresh_families ADD COLUMN sso_org_id TEXT;
ALTER TABLE personal_tokens ADD COLUMN sso_org_id TEXT;
