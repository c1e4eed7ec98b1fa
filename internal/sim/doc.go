// Package sim is Falcon's what-if simulator (falcon sim): it replays a trace
// of jobs in virtual time against simulated GKE clusters and reports, per
// policy, how many node pools were created and reused, how long pools sat
// idle, and how long each user waited.
//
// The decisions are the controller's own, not a model of them: placement
// and the pick rule are package queue's Scheduler (EnqueueExplained, Pick,
// Remove), which pool a job reuses is resourcemanager.ReusablePool, and
// which idle pools are kept or deleted is resourcemanager.PlanPools. The
// pool cap (cap=N) is the manager's poolsOfShape rule, mirrored in poolsOf
// over the same listing, and held to the manager's by the fidelity test. What
// the simulator supplies is the orchestration of one resource-manager cycle
// (the phases of Manager.Reconcile, in its order: acquiring jobs, placing
// new ones, handing out free slots, observing running jobs, releasing
// pools), repeated at one instant until nothing changes, and the world the
// cycle talks to: clusters whose pools take a drawn creation time, a
// reservation of limited capacity with flex-start as the fallback (000
// section 5), flex-start stockouts, and jobs that run for the trace's
// duration. The manager's timing is reproduced too (PoolTiming: pool
// listings up to ListEvery stale, readiness polled at PollInitial doubling
// to PollMax, deletions refused while a pool is still being created),
// because which pool a job gets depends on when the manager sees it. The
// fidelity test in internal/resourcemanager runs the same trace through
// the real API server and manager and compares every job's pool decision.
//
// Its inputs are a trace of JSON lines (trace.go), or the real history
// as the API server lists it (FromHistory, for falcon sim --from-db); its
// outputs are the per-policy Result and, per job, a timeline written as
// CSV or Parquet (report.go).
//
// What it leaves out: failures (every job succeeds; no aborts, timeouts,
// unreachable clusters or controller restarts), CPU-only and GPU jobs'
// batching, and the API server's own latency. Time only jumps to the next
// moment something can change, so a day of traffic takes milliseconds.
package sim
