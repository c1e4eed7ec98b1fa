// Package lifecycle defines the state machines of Falcon's three entities —
// Job, Experiment and Artifact — as explicit transition tables, together with
// the Reason vocabulary that accompanies a Status.
//
// Every status change in Falcon, whether made by the API server on a user's
// behalf or by a controller reporting progress, is checked against these
// tables. Keeping the tables in one pure package means the store, the API
// server and the controllers cannot disagree about which moves are legal, and
// the tables can be tested exhaustively without any I/O.
//
// The propagation rules that derive an experiment's status from its jobs
// (see Propagate) live here too, because they are part of the same model:
// the store (in the transaction of a job's write) and the expController
// only apply what this package decides, so they cannot disagree either.
package lifecycle
