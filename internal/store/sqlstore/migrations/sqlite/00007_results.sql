-- What jobs leave behind: an index of each artifact's files (the bucket is
-- the truth; the index spares listings and cross-experiment queries a walk
-- of it), the metric patterns an experiment declares, the points extracted
-- from its metrics.jsonl and logs, and how far each source was read.
-- +goose Up
ALTER TABLE experiments ADD COLUMN metric_specs TEXT NOT NULL DEFAULT '[]';
ALTER TABLE artifacts ADD COLUMN file_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE artifacts ADD COLUMN byte_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE artifacts ADD COLUMN index_complete INTEGER NOT NULL DEFAULT 0;
ALTER TABLE artifacts ADD COLUMN indexed_at TEXT;

-- TEXT compares byte by byte (BINARY collation), as GCS lists names.
CREATE TABLE artifact_files (
    artifact_id TEXT    NOT NULL REFERENCES artifacts (id) ON DELETE CASCADE,
    path        TEXT    NOT NULL,
    size        INTEGER NOT NULL,
    checksum    TEXT    NOT NULL,
    updated     TEXT    NOT NULL,
    PRIMARY KEY (artifact_id, path)
) STRICT, WITHOUT ROWID;

-- ord numbers a source's points in the order they were read, so that
-- re-reading a source after a crash inserts nothing twice.
CREATE TABLE metric_points (
    exp_id TEXT    NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    name   TEXT    NOT NULL,
    source TEXT    NOT NULL,
    ord    INTEGER NOT NULL,
    step   INTEGER NOT NULL,
    value  REAL    NOT NULL,
    PRIMARY KEY (exp_id, name, source, ord)
) STRICT, WITHOUT ROWID;

CREATE TABLE metric_cursors (
    exp_id     TEXT    NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    source     TEXT    NOT NULL,
    cursor_doc TEXT    NOT NULL,
    skipped    INTEGER NOT NULL,
    done       INTEGER NOT NULL,
    updated_at TEXT    NOT NULL,
    PRIMARY KEY (exp_id, source)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE metric_cursors;
DROP TABLE metric_points;
DROP TABLE artifact_files;
ALTER TABLE artifacts DROP COLUMN indexed_at;
ALTER TABLE artifacts DROP COLUMN index_complete;
ALTER TABLE artifacts DROP COLUMN byte_count;
ALTER TABLE artifacts DROP COLUMN file_count;
ALTER TABLE experiments DROP COLUMN metric_specs;
