-- One running manual scan per organization and target: a second request while one
-- runs is refused (409), so requests cannot pile scans up. Duplicates that an older
-- version let start are ended first (the earliest of each group keeps running).
UPDATE scans SET status = 'cancelled', error = 'one running scan per target', ended_at = updated_at,
    holder = NULL, lease_until = NULL
WHERE origin = 'manual' AND status = 'running' AND EXISTS (
    SELECT 1 FROM scans earlier
    WHERE earlier.org_id = scans.org_id AND earlier.target = scans.target
      AND earlier.origin = 'manual' AND earlier.status = 'running'
      AND (earlier.started_at < scans.started_at
           OR (earlier.started_at = scans.started_at AND earlier.id < scans.id)));
CREATE UNIQUE INDEX scans_one_running_manual ON scans (org_id, target)
    WHERE origin = 'manual' AND status = 'running';
