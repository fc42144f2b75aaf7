-- The posture's counts by current result (and the console's filter by it) read an
-- index of the result instead of parsing every entity's compliance document; the
-- expression is the one the queries use.
CREATE INDEX pipelines_by_result ON pipelines (org_id, ((CAST(compliance AS jsonb)->>'result')));
CREATE INDEX plugins_by_result ON plugins (org_id, ((CAST(compliance AS jsonb)->>'result')));
