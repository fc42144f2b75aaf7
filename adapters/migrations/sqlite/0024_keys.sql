-- Secrets under each organization's own key (issue 58). One process serves an
-- SQLite file: it drops its own unwrapped keys after each change, no trigger needed.

-- Every organization's data key (and the platform's, `org_id` = '_platform', for
-- secrets of accounts), one row per version: the key wrapped by a key-encryption key
-- (`kek_ref` names it: `local:<fingerprint>`, `aws-kms:<arn>`, `vault-transit:<name>`).
-- A new key-encryption key rewraps these rows, never the secrets sealed under them.
CREATE TABLE org_data_keys (
    org_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    wrapped TEXT NOT NULL,
    kek_ref TEXT NOT NULL,
    created_at TEXT NOT NULL,
    rewrapped_at TEXT NOT NULL,
    PRIMARY KEY (org_id, version)
);

-- An organization's customer-managed key: its provider and reference, the Vault
-- address and token (sealed under the platform key), and what the checker saw.
-- `state`: `active` or `orphaned` (the key could not unwrap the data key three
-- times in a row).
CREATE TABLE org_key_configs (
    org_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    key_ref TEXT NOT NULL,
    address TEXT,
    token TEXT,
    state TEXT NOT NULL DEFAULT 'active',
    failures INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    checked_at TEXT,
    orphaned_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
