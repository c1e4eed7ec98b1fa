-- Every change of an experiment and its jobs, numbered per experiment;
-- see the MySQL migration for why last_event_seq lives on the experiment.
-- +goose Up
ALTER TABLE experiments ADD COLUMN last_event_seq INTEGER NOT NULL DEFAULT 0;

CREATE TABLE exp_events (
    exp_id    TEXT    NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    at        TEXT    NOT NULL,
    kind      TEXT    NOT NULL,
    entity_id TEXT    NOT NULL,
    status    TEXT    NOT NULL,
    reason    TEXT    NOT NULL,
    message   TEXT    NOT NULL,
    detail    TEXT    NOT NULL, -- JSON object of strings
    PRIMARY KEY (exp_id, seq)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE exp_events;
ALTER TABLE experiments DROP COLUMN last_event_seq;
