// Package metricsync keeps an experiment's metric points in the store in
// step with what its job reports: metrics.jsonl in the artifact, and rank
// 0's log matched by the manifest's patterns (package runmetrics does the
// parsing).
//
// Each Refresh reads only what is new since the last one: the cursor (byte
// offsets, step counters and the ordinal of each metric's next point) is
// stored with every batch of points in one transaction, and points are keyed
// by that ordinal, so a refresh cut short by a crash at any line is repeated
// without storing a point twice. A refresh made after the experiment ended
// reads the sources to their last byte, including a last line without its
// newline, and marks them done; done sources are never read again.
//
// Only rank 0 of the experiment's first role (in name order) is read for
// log patterns: with several roles, that is the one whose rank 0 a job's
// metrics conventionally come from, and points of one metric from several
// logs would have no single order.
package metricsync
