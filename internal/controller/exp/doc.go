// Package exp is the expController: the loop that carries status upwards,
// Job -> Artifact -> Experiment, through the API server.
//
// Most of that no longer waits for it: a write through the API server
// that moves a job's status brings its experiment and artifact along in
// the same transaction (the store's UpdateJobStatuses applies the same
// lifecycle.Propagate plan), so a job's end is its experiment's end at
// once. What is left to this loop is what that write leaves out: stopping
// the other roles of an experiment whose role failed (and the Message
// saying so), mirroring a pending job's new Reason or Message (a queue
// position: the resource manager's most frequent write, kept short),
// anything written without its experiment (a store written directly, a
// crash of an older server), and the experiments' times to live.
//
// A pending mirror waits until the job's state has held a second (at most
// five in all, mirror.go): most Next and Dispatching states are replaced
// by the job's start within it, and their mirrors were most of this
// loop's writes. A held experiment is looked at again, from a timer, when
// it is due.
//
// Between cycles it keeps only the live experiments as last read (for
// their time-to-live), what it warned of, and since when each pending
// mirror has been held; a restart loses nothing that matters, since its
// first cycle reads every live experiment (a held mirror then waits its
// second again). Each cycle reads the
// experiments the change feed named (every live one on a resync), with
// their jobs and artifacts in batches, applies the plan
// lifecycle.Propagate derives from each, and writes the cycle's experiment
// updates in one UpdateExpStatuses transaction. Every write is conditional
// on the status it read, so a cycle that races with a user's abort loses
// cleanly and the next cycle sees the abort. That is why the loop is
// reentrant and can be killed at any line.
//
// Its own writes reach the change feed marked derived (experiments,
// artifacts) or named as its own (sibling aborts, falconv1.WriterKey):
// their echo does not wake it. The experiment writes of a job's write are
// derived too, and the job's own change is marked settled when that write
// left nothing for this loop (falconv1.Change.settled), as is the creation
// of a single-role experiment without a time-to-live: it skips those, so
// it wakes for the changes it has work in, not for every job's every step.
// A job's write within Pending (falconv1.Change.mirror) can leave it only
// a mirror, which waits a second anyway: its follower holds those for that
// second and names them together (watch.DeferMirrors).
// Its live set (for times to live) may hold an experiment such a write
// ended until the next resync; an experiment with a time-to-live is never
// settled, so it is always read when its jobs change.
package exp
