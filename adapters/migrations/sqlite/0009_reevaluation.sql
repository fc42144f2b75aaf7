-- The re-evaluation queue's processing state: pending (due at run_after; '' is
-- at once), processing (claimed until lease_until), dead (attempts exhausted, with
-- the last error).
ALTER TABLE reevaluation_queue ADD COLUMN status TEXT NOT NULL DEFAULT 'pending';
ALTER TABLE reevaluation_queue ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reevaluation_queue ADD COLUMN run_after TEXT NOT NULL DEFAULT '';
ALTER TABLE reevaluation_queue ADD COLUMN lease_until TEXT;
ALTER TABLE reevaluation_queue ADD COLUMN last_error TEXT;
CREATE INDEX reevaluation_queue_due ON reevaluation_queue (status, run_after, id);
