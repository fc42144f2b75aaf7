-- Hardening (issue 51).

-- What a token may claim is the account's verified address: a change of the address
-- (or its verification) is heard by every replica's kept credentials.
CREATE TRIGGER accounts_email_facts AFTER UPDATE OF email, email_verified_at ON accounts
  FOR EACH ROW EXECUTE FUNCTION compliance_facts_changed();

-- Limits decided in one step on every replica (issue 51). A message is written
-- while its author's row here is locked, after counting the author's last minute;
-- a generation takes a place among its organization's while the organization's row
-- here is locked, and keeps it by renewing its lease (a replica that dies gives its
-- places back when their leases run out).
CREATE TABLE message_rate_locks (
    author_id TEXT PRIMARY KEY
);
CREATE TABLE ai_place_locks (
    org_id TEXT PRIMARY KEY
);
CREATE TABLE ai_places (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX ai_places_by_org ON ai_places (org_id, expires_at);

-- A cloud pipeline's resource name belongs to one organization at a time (live, or
-- deleted and still restorable: its rows stay until the purge): the first
-- registrant keeps it. Duplicates made before are resolved for the earliest.
DELETE FROM pipeline_registry WHERE EXISTS (
    SELECT 1 FROM pipeline_registry earlier
    WHERE earlier.arn = pipeline_registry.arn
      AND (earlier.created_at < pipeline_registry.created_at
           OR (earlier.created_at = pipeline_registry.created_at
               AND earlier.org_id < pipeline_registry.org_id))
);
CREATE UNIQUE INDEX pipeline_registry_one_owner ON pipeline_registry (arn);

-- A registry change is never left unrecorded: its audit events are written here
-- before the registry is touched, moved to the outbox with the answer, and, when
-- that write failed, by the registry worker once the registry shows the change
-- (`check`: what to look for); `abandoned` when it shows none.
CREATE TABLE registry_intents (
    id TEXT PRIMARY KEY,
    events TEXT NOT NULL,
    check_json TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX registry_intents_by_age ON registry_intents (status, created_at);
