// Package metrics implements `falcon exp metrics`: the summary of what an
// experiment's job reported (metrics.jsonl and the manifest's log patterns),
// and with --series the points of a metric.
package metrics
