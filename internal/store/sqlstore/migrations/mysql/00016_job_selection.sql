-- The decision record of a job's placement (design 001's ClusterSelection,
-- as protojson), written with the pick so `falcon exp explain` says why
-- the job went where it did.
-- +goose Up
ALTER TABLE jobs ADD COLUMN selection MEDIUMTEXT NULL;

-- +goose Down
ALTER TABLE jobs DROP COLUMN selection;
