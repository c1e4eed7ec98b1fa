-- Falcon's initial schema for SQLite. It mirrors migrations/mysql: the same
-- tables, columns, unique keys and list indexes, so the two backends behave
-- alike; the types differ.
--
-- Tables are STRICT so a wrong type is an error, as it is on MySQL, instead
-- of being stored silently. Timestamps are TEXT in one fixed-width UTC layout
-- (2006-01-02T15:04:05.000000Z, written by the store), which sorts
-- chronologically and which SQLite's date functions understand.
--
-- seq is INTEGER PRIMARY KEY (the rowid) with AUTOINCREMENT so that a deleted
-- newest row's seq is never reused: a page token holding it stays correct.

-- +goose Up
CREATE TABLE users (
    user_id    TEXT NOT NULL PRIMARY KEY,
    -- NULL when empty: service principals have no email, and uniqueness
    -- applies only to real addresses.
    email      TEXT NULL UNIQUE,
    created_at TEXT NOT NULL
) STRICT;

CREATE TABLE experiments (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    id                TEXT    NOT NULL UNIQUE,
    name              TEXT    NOT NULL UNIQUE,
    exp_type          TEXT    NOT NULL,
    cluster_name      TEXT    NOT NULL,
    priority          INTEGER NOT NULL,
    tags              TEXT    NOT NULL, -- JSON array
    config            TEXT    NOT NULL,
    role_to_task_spec TEXT    NOT NULL, -- JSON object: role -> TaskSpec
    status            TEXT    NOT NULL,
    reason            TEXT    NOT NULL,
    message           TEXT    NOT NULL,
    creator           TEXT    NOT NULL,
    creator_id        TEXT    NOT NULL,
    artifact_path     TEXT    NOT NULL,
    version           INTEGER NOT NULL,
    created_at        TEXT    NOT NULL,
    updated_at        TEXT    NOT NULL,
    started_at        TEXT    NULL,
    finished_at       TEXT    NULL,
    aborting_at       TEXT    NULL,
    aborted_at        TEXT    NULL
) STRICT;
CREATE INDEX experiments_cluster_name_seq ON experiments (cluster_name, seq);
CREATE INDEX experiments_status_seq ON experiments (status, seq);
CREATE INDEX experiments_exp_type_seq ON experiments (exp_type, seq);
CREATE INDEX experiments_creator_seq ON experiments (creator, seq);

CREATE TABLE jobs (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT    NOT NULL UNIQUE,
    exp_id        TEXT    NOT NULL REFERENCES experiments (id),
    exp_name      TEXT    NOT NULL,
    role          TEXT    NOT NULL,
    cluster_name  TEXT    NOT NULL,
    exp_type      TEXT    NOT NULL,
    priority      INTEGER NOT NULL,
    task_spec     TEXT    NOT NULL, -- JSON TaskSpec
    status        TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    message       TEXT    NOT NULL,
    creator       TEXT    NOT NULL,
    artifact_id   TEXT    NOT NULL,
    artifact_path TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    created_at    TEXT    NOT NULL,
    updated_at    TEXT    NOT NULL,
    started_at    TEXT    NULL,
    finished_at   TEXT    NULL,
    aborting_at   TEXT    NULL,
    aborted_at    TEXT    NULL
) STRICT;
CREATE INDEX jobs_exp_id ON jobs (exp_id);
CREATE INDEX jobs_status_seq ON jobs (status, seq);
CREATE INDEX jobs_cluster_name_status_seq ON jobs (cluster_name, status, seq);

CREATE TABLE artifacts (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT    NOT NULL UNIQUE,
    exp_id        TEXT    NOT NULL REFERENCES experiments (id),
    path          TEXT    NOT NULL,
    artifact_type TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    message       TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    created_at    TEXT    NOT NULL,
    updated_at    TEXT    NOT NULL
) STRICT;
CREATE INDEX artifacts_exp_id ON artifacts (exp_id);
CREATE INDEX artifacts_status_seq ON artifacts (status, seq);

CREATE TABLE clusters (
    id                  TEXT NOT NULL PRIMARY KEY,
    name                TEXT NOT NULL UNIQUE,
    backend             TEXT NOT NULL,
    project             TEXT NOT NULL,
    location            TEXT NOT NULL,
    accelerator_types   TEXT NOT NULL, -- JSON array
    gcs_bucket          TEXT NOT NULL,
    default_reservation TEXT NOT NULL,
    status              TEXT NOT NULL,
    created_at          TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE clusters;
DROP TABLE artifacts;
DROP TABLE jobs;
DROP TABLE experiments;
DROP TABLE users;
