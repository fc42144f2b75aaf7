-- A judgement is stored once (issue 59): an entity's outcome and violations at an
-- instant are the row of the check log (a live check, the inventory's door, a
-- re-evaluation) or of a scan's results that made them, and the entity keeps its
-- current result with a reference to that row instead of a copy of its violations.
--   judgement_check   the compliance_checks row it refers to, or
--   judgement_scan    the scan whose result row (scan, target, entity) it refers to;
--   judgement_digest  what the judgement says (a hash of result and violations): a
--                     judgement that says the same leaves the entity's row alone.
-- None of them is indexed, so the update that remains is HOT where PostgreSQL allows.
-- `compliance` is the copy an entity held before: '' once it refers to its judgement.
-- The copies are moved by the server in batches (resumable, services::judgements); the
-- column is dropped by a later release, once no row holds a copy.
ALTER TABLE pipelines ADD COLUMN judgement_check TEXT;
ALTER TABLE pipelines ADD COLUMN judgement_scan TEXT;
ALTER TABLE pipelines ADD COLUMN judgement_digest TEXT;
ALTER TABLE plugins ADD COLUMN judgement_check TEXT;
ALTER TABLE plugins ADD COLUMN judgement_scan TEXT;
ALTER TABLE plugins ADD COLUMN judgement_digest TEXT;
-- The entities that still hold a copy, for the move (empty once it is done): the
-- start of each server finds none without reading the tables. A judgement leaves
-- `compliance` at '', so its update stays HOT.
CREATE INDEX pipelines_holding_copies ON pipelines (id) WHERE compliance <> '';
CREATE INDEX plugins_holding_copies ON plugins (id) WHERE compliance <> '';
-- A judgement an entity refers to that is not an entry of this server's check log (a
-- remote compliance service's verdict at the door, a moved copy) is a check row with
-- listed = 0: kept for its entity, never listed.
ALTER TABLE compliance_checks ADD COLUMN listed INTEGER NOT NULL DEFAULT 1;
-- A judgement's violations (a failing check's run to kilobytes, compressed) stay in
-- their row instead of TOAST's (no TOAST rows and index entries per judgement) while
-- the row fits a page; the row's short columns are never moved out of it (with
-- MAIN alone, PostgreSQL moves them to TOAST one by one, three TOAST rows a check,
-- to bring the row under 2 kB).
ALTER TABLE compliance_checks ALTER COLUMN violations SET STORAGE MAIN;
ALTER TABLE compliance_checks ALTER COLUMN id SET STORAGE PLAIN;
ALTER TABLE compliance_checks ALTER COLUMN org_id SET STORAGE PLAIN;
ALTER TABLE compliance_checks ALTER COLUMN target SET STORAGE PLAIN;
ALTER TABLE compliance_checks ALTER COLUMN entity_id SET STORAGE PLAIN;
ALTER TABLE compliance_checks ALTER COLUMN result SET STORAGE PLAIN;
ALTER TABLE compliance_checks ALTER COLUMN created_at SET STORAGE PLAIN;
ALTER TABLE scan_results ALTER COLUMN violations SET STORAGE MAIN;
ALTER TABLE scan_results ALTER COLUMN scan_id SET STORAGE PLAIN;
ALTER TABLE scan_results ALTER COLUMN org_id SET STORAGE PLAIN;
ALTER TABLE scan_results ALTER COLUMN target SET STORAGE PLAIN;
ALTER TABLE scan_results ALTER COLUMN entity_id SET STORAGE PLAIN;
ALTER TABLE scan_results ALTER COLUMN entity_name SET STORAGE PLAIN;
ALTER TABLE scan_results ALTER COLUMN result SET STORAGE PLAIN;
ALTER TABLE scan_results ALTER COLUMN scanned_at SET STORAGE PLAIN;
