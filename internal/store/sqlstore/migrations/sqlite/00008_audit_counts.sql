-- Calls refused before authentication are recorded in aggregate: one row
-- per source and reason per minute, whose call_count says how many calls
-- it stands for (every other row stands for one). source is where a call
-- came from, for those rows and every other.
-- +goose Up
ALTER TABLE audit_log ADD COLUMN call_count INTEGER NOT NULL DEFAULT 1;
ALTER TABLE audit_log ADD COLUMN source TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE audit_log DROP COLUMN source;
ALTER TABLE audit_log DROP COLUMN call_count;
