-- What jobs leave behind: an index of each artifact's files (the bucket is
-- the truth; the index spares listings and cross-experiment queries a walk
-- of it), the metric patterns an experiment declares, the points extracted
-- from its metrics.jsonl and logs, and how far each source was read.
-- +goose Up
ALTER TABLE experiments ADD COLUMN metric_specs MEDIUMTEXT NOT NULL DEFAULT '[]';

ALTER TABLE artifacts
    ADD COLUMN file_count     BIGINT      NOT NULL DEFAULT 0,
    ADD COLUMN byte_count     BIGINT      NOT NULL DEFAULT 0,
    ADD COLUMN index_complete BOOLEAN     NOT NULL DEFAULT FALSE,
    ADD COLUMN indexed_at     DATETIME(6) NULL;

-- path is binary so that it sorts and compares byte by byte, as GCS lists
-- object names; 1024 bytes is GCS's own limit on a name.
CREATE TABLE artifact_files (
    artifact_id VARCHAR(128)    NOT NULL,
    path        VARBINARY(1024) NOT NULL,
    size        BIGINT          NOT NULL,
    checksum    VARCHAR(64)     NOT NULL,
    updated     DATETIME(6)     NOT NULL,
    PRIMARY KEY (artifact_id, path),
    CONSTRAINT artifact_files_artifact_fk FOREIGN KEY (artifact_id) REFERENCES artifacts (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- ord numbers a source's points in the order they were read, so that
-- re-reading a source after a crash inserts nothing twice.
CREATE TABLE metric_points (
    exp_id VARCHAR(128) NOT NULL,
    name   VARCHAR(255) NOT NULL,
    source VARCHAR(8)   NOT NULL,
    ord    BIGINT       NOT NULL,
    step   BIGINT       NOT NULL,
    value  DOUBLE       NOT NULL,
    PRIMARY KEY (exp_id, name, source, ord),
    CONSTRAINT metric_points_exp_fk FOREIGN KEY (exp_id) REFERENCES experiments (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE metric_cursors (
    exp_id     VARCHAR(128) NOT NULL,
    source     VARCHAR(255) NOT NULL,
    cursor_doc MEDIUMTEXT   NOT NULL,
    skipped    BIGINT       NOT NULL,
    done       BOOLEAN      NOT NULL,
    updated_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (exp_id, source),
    CONSTRAINT metric_cursors_exp_fk FOREIGN KEY (exp_id) REFERENCES experiments (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE metric_cursors;
DROP TABLE metric_points;
DROP TABLE artifact_files;
ALTER TABLE artifacts DROP COLUMN indexed_at, DROP COLUMN index_complete, DROP COLUMN byte_count, DROP COLUMN file_count;
ALTER TABLE experiments DROP COLUMN metric_specs;
