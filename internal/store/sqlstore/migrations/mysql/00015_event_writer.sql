-- Which Store instance (one per server process) wrote each event, and an
-- index by time: a server replica tails the events other replicas wrote
-- (Store.OtherWrites) to wake its own watchers, so a controller connected
-- to one replica learns at once of an abort made through another.
-- +goose Up
ALTER TABLE exp_events ADD COLUMN writer VARCHAR(32) NOT NULL DEFAULT '';
CREATE INDEX exp_events_at ON exp_events (at);

-- +goose Down
DROP INDEX exp_events_at ON exp_events;
ALTER TABLE exp_events DROP COLUMN writer;
