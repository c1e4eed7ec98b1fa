-- Analyses of experiments' artifacts (falcon analyze): queued here, run by
-- the analysis controller, their summaries kept here and their reports in
-- the artifacts. analysis_exps indexes them by experiment.
-- +goose Up
CREATE TABLE analyses (
    seq         BIGINT        NOT NULL AUTO_INCREMENT,
    id          VARCHAR(128)  NOT NULL,
    kind        VARCHAR(64)   NOT NULL,
    exp_ids     TEXT          NOT NULL,
    params      TEXT          NOT NULL,
    status      VARCHAR(32)   NOT NULL,
    message     TEXT          NOT NULL,
    summary     MEDIUMTEXT    NOT NULL,
    report_path VARCHAR(1024) NOT NULL,
    creator     VARCHAR(255)  NOT NULL,
    creator_id  VARCHAR(255)  NOT NULL,
    worker      VARCHAR(255)  NOT NULL,
    created_at  DATETIME(6)   NOT NULL,
    updated_at  DATETIME(6)   NOT NULL,
    claimed_at  DATETIME(6)   NULL,
    started_at  DATETIME(6)   NULL,
    finished_at DATETIME(6)   NULL,
    PRIMARY KEY (seq),
    UNIQUE KEY id (id),
    KEY analyses_status_seq (status, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE analysis_exps (
    exp_id      VARCHAR(128) NOT NULL,
    analysis_id VARCHAR(128) NOT NULL,
    PRIMARY KEY (exp_id, analysis_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE analysis_exps;
DROP TABLE analyses;
