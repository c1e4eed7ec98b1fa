-- Calls refused before authentication are recorded in aggregate: one row
-- per source and reason per minute, whose call_count says how many calls
-- it stands for (every other row stands for one). source is where a call
-- came from, for those rows and every other.
-- +goose Up
ALTER TABLE audit_log
    ADD COLUMN call_count BIGINT       NOT NULL DEFAULT 1,
    ADD COLUMN source     VARCHAR(255) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE audit_log DROP COLUMN source, DROP COLUMN call_count;
