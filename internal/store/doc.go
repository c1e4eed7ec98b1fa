// Package store is Falcon's repository: the entities (users, experiments,
// jobs, artifacts, clusters) and the one interface every backend implements.
//
// The interface is shaped by the invariants the rest of Falcon relies on:
//   - CreateExp writes an experiment, its jobs and its artifact atomically.
//   - AbortExp moves an experiment and its non-terminal jobs to Aborting
//     atomically; ForceAbortExp, for clusters that will never confirm the
//     stop, moves them all the way to Aborted, as atomically.
//   - Every status update carries a precondition (the status the caller read),
//     so a controller acting on a stale read can never overwrite a user's
//     abort that landed in between; it gets ErrFailedPrecondition instead and
//     re-reads.
//   - Lists use keyset pagination over an internal sequence, so page N costs
//     the same as page 1 at any table size.
//   - Every change of an experiment's or a job's status, reason, message or
//     node pool is recorded as an Event in the transaction that makes it,
//     numbered per experiment in commit order, so a watcher that resumes
//     after the last seq it saw misses none; a write that changes nothing
//     records nothing, and each experiment keeps its newest MaxEventsPerExp.
//
// Errors are errdefs kinds (ErrNotFound, ErrFailedPrecondition, ...), never
// driver errors, so callers do not depend on the backend. Implementations
// live in subpackages (sqlstore: MySQL and SQLite).
package store
