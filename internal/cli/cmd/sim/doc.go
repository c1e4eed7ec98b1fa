// Package sim implements `falcon sim`, the scheduler's what-if simulator
// (package internal/sim does the work), and `falcon sim gen`, which writes
// synthetic traces. Both run locally on a trace file, with no server and
// no credentials; only `falcon sim --from-db` talks to the API server, to
// read the jobs table's history (ListJobHistory, admins only).
package sim
