// Package exp is the expController: the loop that carries status upwards,
// Job -> Artifact -> Experiment, through the API server.
//
// It owns no state. Each cycle re-reads every live experiment and applies the
// plan lifecycle.Propagate derives from it; every write is conditional on the
// status it read, so a cycle that races with a user's abort loses cleanly and
// the next cycle sees the abort. That is why the loop is reentrant and can be
// killed at any line.
package exp
