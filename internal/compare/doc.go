// Package compare says how experiments differ: their configs and specs
// (Specs, by key path when a config parses as YAML or JSON, line by line
// otherwise) and their metrics (Metrics: a steady-state value per
// experiment, the change against the first, and a verdict from the
// metric's direction and a rank test on the per-step samples).
//
// It returns structured data only; the CLI renders it as a table, JSON,
// YAML or Markdown. Nothing here calls a service: callers pass the
// experiments and series they read.
package compare
