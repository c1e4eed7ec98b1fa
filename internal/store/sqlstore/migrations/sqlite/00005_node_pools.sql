-- The GKE node pool a job runs on, and the resource manager's last view of
-- each cluster (reservation left, node pools, queues) for the capacity view.
-- The view is one JSON document: it is written whole and read whole.
-- +goose Up
ALTER TABLE jobs ADD COLUMN node_pool TEXT NOT NULL DEFAULT '';
CREATE TABLE cluster_reports (
  cluster_name TEXT NOT NULL PRIMARY KEY,
  report       TEXT NOT NULL,
  reported_at  TEXT NOT NULL
);

-- +goose Down
DROP TABLE cluster_reports;
ALTER TABLE jobs DROP COLUMN node_pool;
