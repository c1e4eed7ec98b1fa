-- Local clusters are not probed: their jobs are the controller's own
-- processes. Servers before this one probed them on demand (cluster status
-- --probe), which could only fail, and kept the failure, which then read
-- as an unreachable cluster to people and to selection. Those rows go; no
-- server writes one any more.
-- +goose Up
DELETE FROM cluster_probes WHERE cluster_name IN (SELECT name FROM clusters WHERE backend = 'local');

-- +goose Down
-- Nothing to put back: the rows said nothing true.
SELECT 1;
