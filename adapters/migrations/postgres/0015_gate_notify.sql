-- The gate's facts (organizations, memberships, Roles, the super-admin flag) are
-- cached on every replica. Each change tells the others inside its own transaction:
-- PostgreSQL delivers the notification at the commit, atomically with it, and never
-- for a transaction that rolls back. One notification per statement; PostgreSQL
-- folds identical ones within a transaction.
CREATE OR REPLACE FUNCTION compliance_gate_changed() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('compliance_gate', '');
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER organizations_gate AFTER INSERT OR UPDATE OR DELETE ON organizations
  FOR EACH STATEMENT EXECUTE FUNCTION compliance_gate_changed();
CREATE TRIGGER memberships_gate AFTER INSERT OR UPDATE OR DELETE ON memberships
  FOR EACH STATEMENT EXECUTE FUNCTION compliance_gate_changed();
CREATE TRIGGER roles_gate AFTER INSERT OR UPDATE OR DELETE ON roles
  FOR EACH STATEMENT EXECUTE FUNCTION compliance_gate_changed();
CREATE TRIGGER role_members_gate AFTER INSERT OR UPDATE OR DELETE ON role_members
  FOR EACH STATEMENT EXECUTE FUNCTION compliance_gate_changed();
-- A user's first sight (an insert without the flag) changes no fact.
CREATE TRIGGER users_gate_insert AFTER INSERT ON users
  FOR EACH ROW WHEN (NEW.super_admin <> 0) EXECUTE FUNCTION compliance_gate_changed();
CREATE TRIGGER users_gate_update AFTER UPDATE OF super_admin ON users
  FOR EACH ROW WHEN (OLD.super_admin IS DISTINCT FROM NEW.super_admin)
  EXECUTE FUNCTION compliance_gate_changed();
CREATE TRIGGER users_gate_delete AFTER DELETE ON users
  FOR EACH STATEMENT EXECUTE FUNCTION compliance_gate_changed();
