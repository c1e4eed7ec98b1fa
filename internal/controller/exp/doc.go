// Package exp is the expController: the loop that carries status upwards,
// Job -> Artifact -> Experiment, through the API server.
//
// Between cycles it keeps only the live experiments as last read (for
// their time-to-live) and what it warned of; a restart loses nothing,
// since its first cycle reads every live experiment. Each cycle reads the
// experiments the change feed named (every live one on a resync), with
// their jobs and artifacts in batches, applies the plan
// lifecycle.Propagate derives from each, and writes the cycle's experiment
// updates in one UpdateExpStatuses transaction. Every write is conditional
// on the status it read, so a cycle that races with a user's abort loses
// cleanly and the next cycle sees the abort. That is why the loop is
// reentrant and can be killed at any line.
//
// Its own writes reach the change feed marked derived: they mirror jobs
// whose changes it has already seen, so their echo does not wake it (nor
// the resource manager).
package exp
