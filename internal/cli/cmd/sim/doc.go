// Package sim implements `falcon sim`, the scheduler's what-if simulator
// (package internal/sim does the work), and `falcon sim gen`, which writes
// synthetic traces. Both run locally: no server, no credentials.
package sim
