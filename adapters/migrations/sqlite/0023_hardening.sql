-- Hardening (issue 51). One process serves an SQLite file: its kept credentials
-- follow the store's own count of changes, so no trigger is needed here for the
-- account's address (PostgreSQL's migration adds one).
SELECT 1;
