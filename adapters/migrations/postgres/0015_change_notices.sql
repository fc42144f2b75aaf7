-- The facts the gate and every check read (organizations, memberships, Roles, the
-- super-admin flag, notification preferences, approved exemptions) are kept on
-- every replica. Each change tells the others inside its own transaction:
-- PostgreSQL delivers the notification at the commit, atomically with it, and never
-- for a transaction that rolls back. One notification per statement; PostgreSQL
-- folds identical ones within a transaction.
CREATE OR REPLACE FUNCTION compliance_facts_changed() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('compliance_facts', '');
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER organizations_facts AFTER INSERT OR UPDATE OR DELETE ON organizations
  FOR EACH STATEMENT EXECUTE FUNCTION compliance_facts_changed();
CREATE TRIGGER memberships_facts AFTER INSERT OR UPDATE OR DELETE ON memberships
  FOR EACH STATEMENT EXECUTE FUNCTION compliance_facts_changed();
CREATE TRIGGER roles_facts AFTER INSERT OR UPDATE OR DELETE ON roles
  FOR EACH STATEMENT EXECUTE FUNCTION compliance_facts_changed();
CREATE TRIGGER role_members_facts AFTER INSERT OR UPDATE OR DELETE ON role_members
  FOR EACH STATEMENT EXECUTE FUNCTION compliance_facts_changed();
CREATE TRIGGER notification_preferences_facts AFTER INSERT OR UPDATE OR DELETE ON notification_preferences
  FOR EACH STATEMENT EXECUTE FUNCTION compliance_facts_changed();
CREATE TRIGGER exemptions_facts AFTER INSERT OR UPDATE OR DELETE ON exemptions
  FOR EACH STATEMENT EXECUTE FUNCTION compliance_facts_changed();
-- A user's first sight (an insert without the flag) changes no fact.
CREATE TRIGGER users_facts_insert AFTER INSERT ON users
  FOR EACH ROW WHEN (NEW.super_admin <> 0) EXECUTE FUNCTION compliance_facts_changed();
CREATE TRIGGER users_facts_update AFTER UPDATE OF super_admin ON users
  FOR EACH ROW WHEN (OLD.super_admin IS DISTINCT FROM NEW.super_admin)
  EXECUTE FUNCTION compliance_facts_changed();
CREATE TRIGGER users_facts_delete AFTER DELETE ON users
  FOR EACH STATEMENT EXECUTE FUNCTION compliance_facts_changed();

-- The compiled rule sets are cached on every replica too. A change of the rules an
-- organization's set is made of tells the others, in the same way, which sets went
-- stale (the channel's payload: `*`, or a JSON array of organization ids, whose teams
-- are stale with them): a published rule or one of the system organization's can be
-- in any set; another rule, a subscription or an organization's deletion only in its
-- organization's and its teams'.
CREATE OR REPLACE FUNCTION compliance_rules_changed() RETURNS trigger AS $$
DECLARE
  changed rules%ROWTYPE;
BEGIN
  IF TG_OP = 'DELETE' THEN
    changed := OLD;
  ELSE
    changed := NEW;
  END IF;
  IF changed.scope = 'published'
     OR (TG_OP = 'UPDATE' AND OLD.scope = 'published')
     OR EXISTS (SELECT 1 FROM organizations o WHERE o.id = changed.org_id AND o.is_system <> 0) THEN
    PERFORM pg_notify('compliance_rule_cache', '*');
  ELSE
    PERFORM pg_notify('compliance_rule_cache', json_build_array(changed.org_id)::text);
  END IF;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION compliance_subscriptions_changed() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM pg_notify('compliance_rule_cache', json_build_array(OLD.org_id)::text);
  ELSE
    PERFORM pg_notify('compliance_rule_cache', json_build_array(NEW.org_id)::text);
  END IF;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION compliance_organization_moved() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('compliance_rule_cache', json_build_array(NEW.id)::text);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER rules_rule_cache AFTER INSERT OR UPDATE OR DELETE ON rules
  FOR EACH ROW EXECUTE FUNCTION compliance_rules_changed();
CREATE TRIGGER subscriptions_rule_cache AFTER INSERT OR UPDATE OR DELETE ON subscriptions
  FOR EACH ROW EXECUTE FUNCTION compliance_subscriptions_changed();
CREATE TRIGGER organizations_rule_cache AFTER UPDATE OF deleted_at, parent_org_id, is_system ON organizations
  FOR EACH ROW EXECUTE FUNCTION compliance_organization_moved();

-- The check log's violations, the notifications' payloads and the entities' snapshots
-- are JSON texts often past the size PostgreSQL compresses at; lz4 compresses them far
-- faster than the default pglz (which took a twelfth of the CPU of a busy validation
-- load). Where the server has no lz4 (built without it, or before PostgreSQL 14), the
-- default stays.
DO $$
BEGIN
  EXECUTE 'ALTER TABLE compliance_checks ALTER COLUMN violations SET COMPRESSION lz4';
  EXECUTE 'ALTER TABLE notifications ALTER COLUMN payload SET COMPRESSION lz4';
  EXECUTE 'ALTER TABLE entity_snapshots ALTER COLUMN attributes SET COMPRESSION lz4';
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'lz4 compression is not available: the default stays';
END $$;

-- A claim of the re-evaluation queue takes an entity's due events and skips an
-- entity whose events another claim holds: both look events up by entity.
CREATE INDEX reevaluation_queue_entity ON reevaluation_queue (org_id, target, entity_id, status);
