-- Analyses of experiments' artifacts (falcon analyze); see the MySQL
-- migration.
-- +goose Up
CREATE TABLE analyses (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT    NOT NULL UNIQUE,
    kind        TEXT    NOT NULL,
    exp_ids     TEXT    NOT NULL,
    params      TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    message     TEXT    NOT NULL,
    summary     TEXT    NOT NULL,
    report_path TEXT    NOT NULL,
    creator     TEXT    NOT NULL,
    creator_id  TEXT    NOT NULL,
    worker      TEXT    NOT NULL,
    created_at  TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL,
    claimed_at  TEXT    NULL,
    started_at  TEXT    NULL,
    finished_at TEXT    NULL
) STRICT;
CREATE INDEX analyses_status_seq ON analyses (status, seq);

CREATE TABLE analysis_exps (
    exp_id      TEXT NOT NULL,
    analysis_id TEXT NOT NULL,
    PRIMARY KEY (exp_id, analysis_id)
) STRICT;

-- +goose Down
DROP TABLE analysis_exps;
DROP TABLE analyses;
