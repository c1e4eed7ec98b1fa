-- A relink (falcon user relink) moves a user's experiments to their new
-- user_id; the index spares it a scan of every experiment.
-- +goose Up
CREATE INDEX experiments_creator_id_seq ON experiments (creator_id, seq);

-- +goose Down
DROP INDEX experiments_creator_id_seq;
