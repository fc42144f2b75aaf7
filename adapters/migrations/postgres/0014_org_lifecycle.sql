-- A soft-deleted organization keeps its row until it is purged; its name is free
-- for others meanwhile (a restore whose name was taken is refused, naming it).
DROP INDEX organizations_name;
CREATE UNIQUE INDEX organizations_name ON organizations (COALESCE(parent_org_id, ''), lower(name))
    WHERE deleted_at IS NULL;
CREATE INDEX organizations_deleted ON organizations (deleted_at) WHERE deleted_at IS NOT NULL;
