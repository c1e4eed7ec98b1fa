-- The last health probe of each cluster (design 001's ClusterProbeResult):
-- one row per cluster, replaced by every probe. Counts are NULL when the
-- cluster could not be reached.
-- +goose Up
CREATE TABLE cluster_probes (
  cluster_name  TEXT    NOT NULL PRIMARY KEY,
  reachable     BOOLEAN NOT NULL,
  queue_depth   INTEGER NULL,
  running_count INTEGER NULL,
  error         TEXT    NOT NULL,
  probed_at     TEXT    NOT NULL
);

-- +goose Down
DROP TABLE cluster_probes;
