package resourcemanager

import (
	"time"

	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// memory is everything the resource manager carries from one cycle to the
// next. The job rows are the truth — status, reason, cluster, node pool and
// the times each phase began — and none of this is needed to be correct:
// it paces calls, keeps fairness and avoids rewriting what was written. It
// lives in this one type so that what a restart loses is written down in
// one place:
//
//   - sched: the queue index is rebuilt from the rows on the first cycle;
//     which actor each queue served last is lost, so the next pick in a
//     queue whose slot is free may serve the same actor twice in a row (a
//     one-turn fairness blip, see package queue).
//   - positions, nearWritten, tailWritten: every waiting job's position is
//     written again once if it differs from its row.
//   - poolLists: every pool cluster is listed again at once.
//   - polls, deletes: a pool being provisioned is looked at, and an idle
//     pool deleted, at once rather than at its next backoff step; the count
//     of failed deletions starts again, so the note on the pool's last job
//     comes DeleteAttempts failures later.
//   - dispatchFailing, stopFailing: a job whose dispatch or stop keeps
//     failing gets a new retry window, its backoff starting again from the
//     first wait. The failure is transient by
//     definition, the job's own timeout still applies, and an abort can be
//     forced (exp abort --force).
//   - idleSince, lastOwner: the capacity view shows a pool idle since the
//     restart, and a failed deletion's note goes to the job it was created
//     for rather than the last one that used it.
//   - reportedAt: each cluster's capacity view is reported at once.
//   - configRead: a job on deck when the controller restarted has its
//     config read once more before its submission.
//   - submitted: a CPU-only job submitted before the restart holds its
//     queue's slot again until its pods run, as a job that acquires does;
//     the next CPU-only jobs of that cluster wait for it once.
//   - leftovers: what a forced abort, or a stop its cluster never
//     confirmed, left running is no longer stopped again from memory; the
//     first resync's sweep finds it on the clusters whose backend can say
//     what they hold (Sweeper).
//   - due, touched, unreachable: the first cycle after a restart reads and
//     looks at every job, so nothing is owed.
//
// The deck (Manager.deck), shared with the goroutines that hand slots over
// between cycles, is memory too and lives beside this type: a restart
// loses the handovers it waited on, and the first cycle sets them again
// from the rows that say Next. So is ends (Manager.ends), which records
// Running jobs' successes between cycles: a restart loses which jobs it
// watched, the rows it wrote but the cycle had not folded yet, the jobs
// waiting for an ended job's pool, and a finished Kubernetes Job's delete
// not yet made; the first cycle reads every row again, arms every Running
// job, finds the pool idle, and its sweep deletes what an ended job left
// on a pooled cluster.
type memory struct {
	sched       *queue.Scheduler
	positions   map[string]int          // waiting job -> position last written
	nearWritten map[queue.Key]time.Time // when each queue's front was last told
	tailWritten map[queue.Key]time.Time
	lastPending map[string]bool

	poolLists map[string]poolListing // by cluster
	polls     map[string]*backoff    // provisioning jobs, by job ID
	deletes   map[poolKey]*backoff
	idleSince map[poolKey]time.Time
	lastOwner map[poolKey]string

	// dispatchFailing paces the dispatch of each job whose submission
	// failed with a RetryableError (since when, the next try), until it
	// succeeds or the job leaves Pending.
	dispatchFailing map[string]*backoff
	// stopFailing paces the Stop of a job that is Aborting or being failed
	// while its cluster refuses or does not answer.
	stopFailing map[string]*backoff
	// submitted holds the CPU-only jobs whose cluster accepted them: they
	// acquire nothing, so they gave their queue's slot back at submission
	// (see noAcquisition) and are watched until their pods run without it.
	submitted map[string]bool

	reportedAt map[string]time.Time

	// configRead holds the jobs on deck whose experiment config came back
	// with the write that put them there, so their submission need not
	// read it (submit); an empty config is one too.
	configRead map[string]bool

	// leftovers are jobs that ended without this manager stopping them
	// while their cluster may still hold what they started, by job ID
	// (see leftover).
	leftovers map[string]*leftover

	// due is when each job must be looked at again although nothing
	// changed: its timeout, its pool's next poll, its stop's backoff.
	due map[string]time.Time
	// touched are the queues whose order or holder changed since their
	// waiting jobs were last told their positions (see nearRefresh).
	touched map[queue.Key]bool
	// unreachable is which clusters were unreachable last cycle: a change
	// is news for every job there.
	unreachable map[string]bool
}

func newMemory(now func() time.Time) *memory {
	return &memory{
		sched:           queue.New(queue.WithClock(now)),
		positions:       map[string]int{},
		nearWritten:     map[queue.Key]time.Time{},
		tailWritten:     map[queue.Key]time.Time{},
		lastPending:     map[string]bool{},
		poolLists:       map[string]poolListing{},
		polls:           map[string]*backoff{},
		deletes:         map[poolKey]*backoff{},
		idleSince:       map[poolKey]time.Time{},
		lastOwner:       map[poolKey]string{},
		dispatchFailing: map[string]*backoff{},
		stopFailing:     map[string]*backoff{},
		submitted:       map[string]bool{},
		reportedAt:      map[string]time.Time{},
		configRead:      map[string]bool{},
		leftovers:       map[string]*leftover{},
		due:             map[string]time.Time{},
		touched:         map[queue.Key]bool{},
		unreachable:     map[string]bool{},
	}
}

// forgetJob drops what the memory holds for a job that ended.
func (mem *memory) forgetJob(id string) {
	mem.leaveQueue(id)
	delete(mem.stopFailing, id)
	delete(mem.submitted, id)
	delete(mem.due, id)
}

// leaveQueue takes a job that is no longer waiting or acquiring out of its
// queue (freeing the slot it may hold).
func (mem *memory) leaveQueue(id string) {
	if key, _, ok := mem.sched.Lookup(id); ok {
		mem.touched[key] = true
		_ = mem.sched.Remove(id)
	}
	delete(mem.dispatchFailing, id)
	delete(mem.positions, id)
	delete(mem.configRead, id)
	delete(mem.polls, id)
}
