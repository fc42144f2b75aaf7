-- Hardening (issue 51).

-- What a token may claim is the account's verified address: a change of the address
-- (or its verification) is heard by every replica's kept credentials.
CREATE TRIGGER accounts_email_facts AFTER UPDATE OF email, email_verified_at ON accounts
  FOR EACH ROW EXECUTE FUNCTION compliance_facts_changed();
