-- Falcon's initial schema for MySQL/MariaDB.
--
-- Every table is utf8mb4 with a binary collation so that names, IDs and
-- filters compare byte for byte, exactly as they do on SQLite; the default
-- case-insensitive collation would make "Exp" and "exp" collide here but not
-- there.
--
-- experiments, jobs and artifacts carry an auto-increment seq as the primary
-- key: lists page by seq (keyset pagination), and every secondary index ends
-- in it implicitly, so "WHERE status = ? AND seq < ? ORDER BY seq DESC" is a
-- single index range scan at any table size. The public id is a unique key.
--
-- Unique keys are named after their column because the store reads the key
-- name out of duplicate-entry errors to say which value already exists.

-- +goose Up
CREATE TABLE users (
    user_id    VARCHAR(255) NOT NULL,
    -- NULL when empty: service principals have no email, and uniqueness
    -- applies only to real addresses.
    email      VARCHAR(255) NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (user_id),
    UNIQUE KEY email (email)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE experiments (
    seq               BIGINT        NOT NULL AUTO_INCREMENT,
    id                VARCHAR(128)  NOT NULL,
    name              VARCHAR(255)  NOT NULL,
    exp_type          VARCHAR(128)  NOT NULL,
    cluster_name      VARCHAR(255)  NOT NULL,
    priority          INT           NOT NULL,
    tags              TEXT          NOT NULL, -- JSON array
    config            MEDIUMTEXT    NOT NULL, -- up to 1 MiB
    role_to_task_spec MEDIUMTEXT    NOT NULL, -- JSON object: role -> TaskSpec
    status            VARCHAR(32)   NOT NULL,
    reason            VARCHAR(128)  NOT NULL,
    message           MEDIUMTEXT    NOT NULL,
    creator           VARCHAR(255)  NOT NULL,
    creator_id        VARCHAR(255)  NOT NULL,
    artifact_path     VARCHAR(1024) NOT NULL,
    version           BIGINT        NOT NULL,
    created_at        DATETIME(6)   NOT NULL,
    updated_at        DATETIME(6)   NOT NULL,
    started_at        DATETIME(6)   NULL,
    finished_at       DATETIME(6)   NULL,
    aborting_at       DATETIME(6)   NULL,
    aborted_at        DATETIME(6)   NULL,
    PRIMARY KEY (seq),
    UNIQUE KEY id (id),
    UNIQUE KEY name (name),
    KEY experiments_cluster_name_seq (cluster_name, seq),
    KEY experiments_status_seq (status, seq),
    KEY experiments_exp_type_seq (exp_type, seq),
    KEY experiments_creator_seq (creator, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE jobs (
    seq           BIGINT        NOT NULL AUTO_INCREMENT,
    id            VARCHAR(128)  NOT NULL,
    exp_id        VARCHAR(128)  NOT NULL,
    exp_name      VARCHAR(255)  NOT NULL,
    role          VARCHAR(128)  NOT NULL,
    cluster_name  VARCHAR(255)  NOT NULL,
    exp_type      VARCHAR(128)  NOT NULL,
    priority      INT           NOT NULL,
    task_spec     MEDIUMTEXT    NOT NULL, -- JSON TaskSpec
    status        VARCHAR(32)   NOT NULL,
    reason        VARCHAR(128)  NOT NULL,
    message       MEDIUMTEXT    NOT NULL,
    creator       VARCHAR(255)  NOT NULL,
    artifact_id   VARCHAR(128)  NOT NULL,
    artifact_path VARCHAR(1024) NOT NULL,
    version       BIGINT        NOT NULL,
    created_at    DATETIME(6)   NOT NULL,
    updated_at    DATETIME(6)   NOT NULL,
    started_at    DATETIME(6)   NULL,
    finished_at   DATETIME(6)   NULL,
    aborting_at   DATETIME(6)   NULL,
    aborted_at    DATETIME(6)   NULL,
    PRIMARY KEY (seq),
    UNIQUE KEY id (id),
    KEY jobs_exp_id (exp_id),
    KEY jobs_status_seq (status, seq),
    KEY jobs_cluster_name_status_seq (cluster_name, status, seq),
    CONSTRAINT jobs_exp_id_fk FOREIGN KEY (exp_id) REFERENCES experiments (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE artifacts (
    seq           BIGINT        NOT NULL AUTO_INCREMENT,
    id            VARCHAR(128)  NOT NULL,
    exp_id        VARCHAR(128)  NOT NULL,
    path          VARCHAR(1024) NOT NULL,
    artifact_type VARCHAR(128)  NOT NULL,
    status        VARCHAR(32)   NOT NULL,
    reason        VARCHAR(128)  NOT NULL,
    message       MEDIUMTEXT    NOT NULL,
    version       BIGINT        NOT NULL,
    created_at    DATETIME(6)   NOT NULL,
    updated_at    DATETIME(6)   NOT NULL,
    PRIMARY KEY (seq),
    UNIQUE KEY id (id),
    KEY artifacts_exp_id (exp_id),
    KEY artifacts_status_seq (status, seq),
    CONSTRAINT artifacts_exp_id_fk FOREIGN KEY (exp_id) REFERENCES experiments (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE clusters (
    id                  VARCHAR(128)  NOT NULL,
    name                VARCHAR(255)  NOT NULL,
    backend             VARCHAR(64)   NOT NULL,
    project             VARCHAR(255)  NOT NULL,
    location            VARCHAR(255)  NOT NULL,
    accelerator_types   TEXT          NOT NULL, -- JSON array
    gcs_bucket          VARCHAR(255)  NOT NULL,
    default_reservation VARCHAR(255)  NOT NULL,
    status              VARCHAR(32)   NOT NULL,
    created_at          DATETIME(6)   NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE clusters;
DROP TABLE artifacts;
DROP TABLE jobs;
DROP TABLE experiments;
DROP TABLE users;
