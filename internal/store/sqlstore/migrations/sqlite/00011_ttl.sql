-- Time-to-live of experiments (falcon exp create --ttl, interactive
-- slices, falcon exp extend); see the MySQL migration for the columns.
-- +goose Up
ALTER TABLE experiments ADD COLUMN ttl_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE experiments ADD COLUMN idle_ttl_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE experiments ADD COLUMN interactive INTEGER NOT NULL DEFAULT 0;
ALTER TABLE experiments ADD COLUMN expires_at TEXT NULL;
ALTER TABLE experiments ADD COLUMN active_at TEXT NULL;
ALTER TABLE experiments ADD COLUMN ttl_warned_for TEXT NULL;

-- +goose Down
ALTER TABLE experiments DROP COLUMN ttl_ms;
ALTER TABLE experiments DROP COLUMN idle_ttl_ms;
ALTER TABLE experiments DROP COLUMN interactive;
ALTER TABLE experiments DROP COLUMN expires_at;
ALTER TABLE experiments DROP COLUMN active_at;
ALTER TABLE experiments DROP COLUMN ttl_warned_for;
