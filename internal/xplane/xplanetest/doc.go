// Package xplanetest writes XSpace profiles for tests and benchmarks with
// the generated types of api/xplane/v1: small ones whole (Builder,
// WriteFile), and large ones streaming to disk (WriteSynthetic), whose
// Totals are the figures an analysis of them must find, worked out from
// the description alone. HeapSampler measures the Go heap's high-water
// mark while a test reads them.
package xplanetest
