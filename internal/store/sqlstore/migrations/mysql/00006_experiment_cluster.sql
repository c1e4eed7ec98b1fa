-- An experiment that names no cluster records the first cluster one of its
-- jobs was placed on (the store does so from now on); this fills it in for
-- experiments placed before, with the alphabetically first of their jobs'
-- clusters, since the order of placement was not recorded.
-- +goose Up
UPDATE experiments SET cluster_name = (
    SELECT MIN(j.cluster_name) FROM jobs j WHERE j.exp_id = experiments.id AND j.cluster_name <> ''
) WHERE cluster_name = '' AND EXISTS (
    SELECT 1 FROM jobs j WHERE j.exp_id = experiments.id AND j.cluster_name <> ''
);

-- +goose Down
-- Nothing to undo: which experiments were pinned is not recorded apart.
SELECT 1;
