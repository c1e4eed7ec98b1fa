-- Settings of the cluster registry as a whole, beside its clusters: one
-- row per name (today only selection: the policy that places jobs, spread
-- or priority), written by ApplyClusters. A missing row is the default.
-- +goose Up
CREATE TABLE registry_settings (
  name  TEXT NOT NULL PRIMARY KEY,
  value TEXT NOT NULL
);

-- +goose Down
DROP TABLE registry_settings;
