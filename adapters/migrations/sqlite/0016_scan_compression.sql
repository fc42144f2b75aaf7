-- PostgreSQL's 0016 chooses lz4 for the large JSON texts of scans. SQLite stores text
-- as it is given: nothing to choose. The number is kept so that a migration's number
-- names the same change on both backends.
SELECT 1;
