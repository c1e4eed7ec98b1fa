// Package metrics defines the Prometheus metrics Falcon's controllers and
// its store export, and the small HTTP surface that serves them with
// liveness and readiness checks (/metrics, /healthz, /readyz).
//
// Metrics are registered on a registry the caller owns rather than the
// global one, so tests and several controllers in one process (falcon dev)
// never collide. Labels are bounded: cluster names, topologies, statuses
// and reasons, never job or experiment IDs. Gauges that describe a view
// rebuilt every cycle (queues, clusters, node pools) go through GaugeSet,
// which deletes the series a cycle no longer has instead of resetting the
// vector, so a scrape never catches it empty.
package metrics
