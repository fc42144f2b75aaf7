-- Idempotency keys belong to the service that sent them (SEMANTICS.md 2): the same
-- key from two services names two events. Existing rows are kept.
DROP INDEX audit_events_idempotency;
CREATE UNIQUE INDEX audit_events_service_key ON audit_events (service, idempotency_key);
