-- Which Store instance wrote each event, and an index by time; see the
-- MySQL migration.
-- +goose Up
ALTER TABLE exp_events ADD COLUMN writer TEXT NOT NULL DEFAULT '';
CREATE INDEX exp_events_at ON exp_events (at);

-- +goose Down
DROP INDEX exp_events_at;
ALTER TABLE exp_events DROP COLUMN writer;
