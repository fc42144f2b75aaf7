-- Messages (issue 36): announcements with their window, audience and per-user
-- dismissals; conversations between members of one organization with per-participant
-- read markers; a feed every replica reads to stream what is new.

-- An announcement. `audience`: `organization` (its admins', `org_id` the
-- organization, `include_teams` every team of it, `announcement_targets` some
-- teams), `organizations` (a super-admin's, to the targets), `everyone`, or `tier`.
CREATE TABLE announcements (
    id TEXT PRIMARY KEY,
    org_id TEXT,
    audience TEXT NOT NULL,
    include_teams BIGINT NOT NULL DEFAULT 0,
    tier TEXT,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    severity TEXT NOT NULL,
    starts_at TEXT NOT NULL,
    ends_at TEXT,
    dismissible BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX announcements_by_org ON announcements (org_id);
CREATE INDEX announcements_by_end ON announcements (ends_at);

CREATE TABLE announcement_targets (
    announcement_id TEXT NOT NULL REFERENCES announcements (id) ON DELETE CASCADE,
    org_id TEXT NOT NULL,
    PRIMARY KEY (announcement_id, org_id)
);
CREATE INDEX announcement_targets_by_org ON announcement_targets (org_id);

-- Dismissals are the server's, per user (not a cookie of one browser).
CREATE TABLE announcement_dismissals (
    announcement_id TEXT NOT NULL REFERENCES announcements (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    dismissed_at TEXT NOT NULL,
    PRIMARY KEY (announcement_id, user_id)
);

CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations (id),
    subject TEXT,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_message_at TEXT NOT NULL
);
CREATE INDEX conversations_by_org ON conversations (org_id, last_message_at);

-- A participant reads up to `last_read_at`; one who left (`left_at`) sees the
-- conversation no more.
CREATE TABLE conversation_participants (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    joined_at TEXT NOT NULL,
    last_read_at TEXT,
    left_at TEXT,
    PRIMARY KEY (conversation_id, user_id)
);
CREATE INDEX conversation_participants_by_user ON conversation_participants (user_id);

CREATE TABLE conversation_messages (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    org_id TEXT NOT NULL,
    author_id TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX conversation_messages_by_time ON conversation_messages (conversation_id, created_at, id);
CREATE INDEX conversation_messages_by_author ON conversation_messages (author_id, created_at);
CREATE INDEX conversation_messages_by_age ON conversation_messages (created_at);

-- What is new, in the transaction that made it: every replica reads the last
-- seconds of it and streams each row once to the users it is for (`recipients`, a
-- JSON array, for a conversation's message; the announcement's audience otherwise).
CREATE TABLE message_feed (
    seq BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL,
    ref_id TEXT NOT NULL,
    recipients TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX message_feed_by_time ON message_feed (created_at);

-- The organization's admins may post and manage announcements: the built-in Admin
-- and Super Admin Roles take the new permission.
UPDATE roles SET permissions = (permissions::jsonb || '["messages:manage"]'::jsonb)::text
 WHERE built_in = 1 AND name IN ('Admin', 'Super Admin')
   AND NOT (permissions::jsonb ? 'messages:manage');
