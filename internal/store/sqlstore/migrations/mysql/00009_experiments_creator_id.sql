-- A relink (falcon user relink) moves a user's experiments to their new
-- user_id. Without an index the UPDATE would scan, and on InnoDB lock,
-- every experiment until it commits, stalling every status update.
-- +goose Up
CREATE INDEX experiments_creator_id_seq ON experiments (creator_id, seq);

-- +goose Down
DROP INDEX experiments_creator_id_seq ON experiments;
