-- Each entity keeps its current result in a column of its own, written with its
-- compliance document: the posture's counts and the filter by result read an index of
-- it. The expression index of 0021 parsed every written document to find its
-- result, which was more than half of a scan's database work.
ALTER TABLE pipelines ADD COLUMN compliance_result TEXT;
ALTER TABLE plugins ADD COLUMN compliance_result TEXT;
UPDATE pipelines SET compliance_result = compliance ->> 'result';
UPDATE plugins SET compliance_result = compliance ->> 'result';
DROP INDEX pipelines_by_result;
DROP INDEX plugins_by_result;
CREATE INDEX pipelines_by_result ON pipelines (org_id, compliance_result);
CREATE INDEX plugins_by_result ON plugins (org_id, compliance_result);
