-- Organizations, users, memberships, roles and invitations.
-- Timestamps are RFC 3339 text and flags are 0/1 integers on both backends, so that
-- one set of queries serves PostgreSQL and SQLite.
CREATE TABLE users (
    id TEXT PRIMARY KEY,
    email TEXT,
    super_admin INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);

CREATE TABLE organizations (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    display_name TEXT,
    parent_org_id TEXT REFERENCES organizations (id),
    tier TEXT NOT NULL,
    is_system INTEGER NOT NULL DEFAULT 0,
    owner_id TEXT NOT NULL,
    deleted_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX organizations_name ON organizations (COALESCE(parent_org_id, ''), lower(name));
CREATE UNIQUE INDEX organizations_one_system ON organizations (is_system) WHERE is_system = 1;
CREATE INDEX organizations_parent ON organizations (parent_org_id);

CREATE TABLE memberships (
    org_id TEXT NOT NULL REFERENCES organizations (id),
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    active INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    PRIMARY KEY (org_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

CREATE TABLE roles (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations (id),
    name TEXT NOT NULL,
    permissions TEXT NOT NULL,
    built_in INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE UNIQUE INDEX roles_name ON roles (org_id, lower(name));

CREATE TABLE role_members (
    role_id TEXT NOT NULL REFERENCES roles (id),
    org_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    PRIMARY KEY (role_id, user_id)
);
CREATE INDEX role_members_user ON role_members (org_id, user_id);

CREATE TABLE invitations (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations (id),
    email TEXT NOT NULL,
    role TEXT NOT NULL,
    status TEXT NOT NULL,
    invited_by TEXT NOT NULL,
    sent_count INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    last_sent_at TEXT NOT NULL
);
CREATE INDEX invitations_org ON invitations (org_id);
