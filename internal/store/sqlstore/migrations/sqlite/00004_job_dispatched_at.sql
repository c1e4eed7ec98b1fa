-- When a job left its queue to acquire resources, so its timeout for
-- acquiring survives a controller restart.
-- +goose Up
ALTER TABLE jobs ADD COLUMN dispatched_at TEXT;

-- +goose Down
ALTER TABLE jobs DROP COLUMN dispatched_at;
