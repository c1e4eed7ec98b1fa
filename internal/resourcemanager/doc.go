// Package resourcemanager moves jobs from Pending to a terminal status: it
// picks a cluster for each waiting job, queues it fairly per (cluster,
// shape), gets it a node pool where the cluster's backend manages pools,
// dispatches it through that cluster's Backend, reconciles what the backend
// reports, enforces timeouts and carries out aborts.
//
// # One cycle
//
// Reconcile's doc comment numbers the steps. A cycle reads a snapshot of
// the live jobs, decides per job from what it reads, and writes each
// decision as a status update conditional on the status read. The snapshot
// is kept current from the API server's change feed (WatchChanges, resumed
// from the last change seen) rather than by listing every live job, so a
// cycle costs what changed: the jobs whose experiments the feed named, the
// jobs a backend reported (a Kubernetes informer event or a local process
// exit names its job), and the jobs whose deadline came (a timeout, a
// pool's next poll, a stop's backoff). The echoes of the manager's own
// status writes are not news (it names itself on them, and each write
// returns the row it left, which goes into the snapshot), so they wake no
// cycle; a write that failed without an answer is read again instead. Every job is looked at on a resync:
// the first cycle, whenever the feed cannot vouch for what it missed, when
// a cluster's reachability changes, and every 30s as the safety net for
// writes made through another API server replica.
//
// The slot of a queue is handed over in the cycle that learns its holder's
// pods run (or that it ended), which the backend's report starts at once:
// there is no wait for a poll between one job's pods running and the next
// job's submission. Under Run, where the next job needs nothing but its
// submission, it does not wait for a cycle either: the cycle that hands a
// slot to one job picks the one after it ahead (Pending/Next, its cluster
// on its row), and the deck (deck.go) submits it the moment the backend
// reports the holder's pods running, the cycle recording both afterwards
// in one write. Under Run the submission itself leaves the cycle
// (submitter): the cycle records the pick, hands the Kubernetes create to
// a per-cluster worker and ends, so one queue's create never holds another
// queue's handover; the next cycle that looks at the job decides on what
// the create returned, and an abort of a job whose create is in flight
// waits for it.
//
// A Running job's success does not wait for a cycle either: ends (ends.go)
// looks at the job the moment the backend reports it, writes Succeeded at
// once (conditional on Running, so an abort that landed first wins) and
// leaves the row for the next cycle to fold into the snapshot. Failures
// stay the cycle's: they stop the job's other pods first. Where the
// backend manages pools, ends also removes the finished Kubernetes Job, and
// the pool falls free when the row is folded; a job that would create a
// pool of that shape meanwhile waits for it instead.
//
// # Plan and apply
//
// Every decision a cycle takes is a pure function in plan.go: what to do
// with an acquiring job before and after its cluster is asked
// (planAcquiring, planObserved, and releases, the deck's rule), whether a
// queue's next job is picked ahead (planReserve), what a submission's outcome means
// (planDispatch), the same for a Running job (planRunning,
// planRunningObserved), how an abort ends (planAbort), what a failed stop
// means and when to ask again (planStopOutcome), which queue positions to
// write (planPositions), what a pool that will never be ready means for its
// job (planPoolFailure) and which node pools to keep or delete (PlanPools). Which job a free slot goes to is package queue's pick rule.
// They read facts and the time and return decisions, so each rule is a row
// of a table test; the cycle gathers the facts, calls them and carries the
// decisions out, feeding what each call returned (a dispatch's error, an
// observation) into the next decision about the same job. The cycle still
// walks the jobs one by one rather than planning the whole snapshot at
// once: the decisions are pure, their order is the cycle's.
//
// # What crosses cycles
//
// The job rows are the truth: status, reason (the Pending phase, see
// lifecycle.PendingPhases), cluster, node pool, and when each phase began.
// Everything the manager remembers between cycles is in one type, memory,
// whose comment lists what a restart loses; none of it is needed to be
// correct. So the manager is level-triggered: every backend call is
// idempotent and keyed by the job ID, and a crash between any two lines
// converges on restart: a job left Dispatching is dispatched again (finding
// its existing processes or pods), a pool created for a job that was never
// recorded is adopted, and an abort that landed while a write was in flight
// wins because every write is conditional on the status read.
//
// # Nothing stuck
//
// A dispatch that fails for a reason that may pass is retried with backoff
// for its window (Retry.Dispatch, the --dispatch-retry-* flags), the job's
// Message naming the error and when it is tried again; a refusal that
// cannot pass (invalid, forbidden, a cluster no connection can be built to)
// fails the job at once with the cause. A stop that keeps failing is asked
// again with backoff for its window (Retry.Stop, --stop-retry-*), then the
// outcome is recorded anyway, its Message saying the cluster never
// confirmed the stop; an abort that must not wait is forced through the API
// (exp abort --force).
// Either way nothing is forgotten on the cluster: a job that ended without
// its stop confirmed, or ended under the manager by a forced abort (also
// while its create was in flight), is a leftover whose stop is asked again
// with backoff until the cluster confirms (leftovers.go). That memory dies
// with the controller; the next one's first resync sweeps the clusters
// whose backend can say what they hold (Sweeper) for the objects of ended
// jobs that planLeftover says must go.
//
// Backends are small and declared here, where they are used; the local
// process backend lives in internal/provider/local, the Kubernetes and GKE
// ones in internal/provider/kube and internal/provider/gke.
package resourcemanager
