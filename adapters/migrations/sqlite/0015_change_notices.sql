-- A claim of the re-evaluation queue takes an entity's due events and skips an
-- entity whose events another claim holds: both look events up by entity.
CREATE INDEX reevaluation_queue_entity ON reevaluation_queue (org_id, target, entity_id, status);
