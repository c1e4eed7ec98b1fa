-- How to reach and use a cluster (namespace, kubeconfig context, queue depth,
-- accelerator priorities): one JSON document, since it grows with backends
-- and nothing queries inside it.
-- +goose Up
ALTER TABLE clusters ADD COLUMN spec MEDIUMTEXT NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE clusters DROP COLUMN spec;
