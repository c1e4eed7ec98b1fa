-- The last health probe of each cluster (design 001's ClusterProbeResult):
-- one row per cluster, replaced by every probe. Counts are NULL when the
-- cluster could not be reached.
-- +goose Up
CREATE TABLE cluster_probes (
  cluster_name  VARCHAR(255) NOT NULL PRIMARY KEY,
  reachable     BOOLEAN      NOT NULL,
  queue_depth   INT          NULL,
  running_count INT          NULL,
  error         TEXT         NOT NULL,
  probed_at     DATETIME(6)  NOT NULL
);

-- +goose Down
DROP TABLE cluster_probes;
