package resourcemanager

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// The plan: every decision a cycle takes, as pure functions of what the
// cycle read and the time. Each takes the facts about one job, one queue or
// one cluster's pools and returns what to do; the cycle (cycle.go,
// pools.go) gathers the facts, calls these, and carries the decisions out
// against the API server and the backends, feeding what each call returned
// into the next decision. None of them does I/O, reads a clock or changes
// what it is given, so each rule is a row of a table test (plan_test.go),
// and the simulator of what-if policies can drive the same rules.

// verb is what a decision asks the cycle to do.
type verb int

const (
	// keep leaves the job as it is until its deadline or the next change.
	keep verb = iota
	// proceed goes on to the next step: ask the cluster.
	proceed
	// record writes the status, reason and message; nothing on the cluster
	// needs stopping first.
	record
	// stopThenRecord stops the job on its cluster (see planStopOutcome),
	// then records the outcome.
	stopThenRecord
	// giveUp records a job whose dispatch failed for its retry window
	// (Retry.Dispatch), after one try at removing anything a create may
	// have left.
	giveUp
)

// decision is the plan's answer for one job.
type decision struct {
	verb    verb
	to      lifecycle.Status
	reason  lifecycle.Reason
	message string
	// deadline is when the job must be looked at again although nothing
	// changes (zero: none).
	deadline time.Time
	// at is when the change happened, as the job's cluster saw it: when a
	// job that runs began to, or one that ends ended (zero: when it is
	// recorded; see Observation.At).
	at time.Time
}

func (d decision) String() string {
	names := [...]string{"keep", "proceed", "record", "stopThenRecord", "giveUp"}
	s := names[d.verb]
	if d.to != "" {
		s += " " + string(d.to)
		if d.reason != "" {
			s += "/" + string(d.reason)
		}
	}
	if d.message != "" {
		s += fmt.Sprintf(" %q", d.message)
	}
	if !d.deadline.IsZero() {
		s += " until " + d.deadline.Format(time.RFC3339)
	}
	if !d.at.IsZero() {
		s += " at " + d.at.Format(time.RFC3339Nano)
	}
	return s
}

// request is the status write of d for j, conditional on the status j had
// when read.
func (d decision) request(j *falconv1.Job) *falconv1.UpdateJobStatusRequest {
	r := &falconv1.UpdateJobStatusRequest{
		Id: j.GetId(), ExpectedStatus: j.GetStatus(), Status: string(d.to), Reason: string(d.reason), Message: d.message,
	}
	switch {
	case d.at.IsZero():
	case d.to == lifecycle.Running:
		r.StartedAt = timestamppb.New(d.at)
	case lifecycle.JobMachine.IsTerminal(d.to):
		r.FinishedAt = timestamppb.New(d.at)
	}
	return r
}

// changes reports whether writing d would change what j says.
func (d decision) changes(j *falconv1.Job) bool {
	return j.GetStatus() != string(d.to) || j.GetReason() != string(d.reason) || j.GetMessage() != d.message
}

// dated is d, dated as obs dates its change when d records the same one:
// a job that runs (from an observation that it runs) or ends.
func (d decision) dated(obs Observation) decision {
	if (d.to == lifecycle.Running && obs.Phase == PhaseRunning) || lifecycle.JobMachine.IsTerminal(d.to) {
		d.at = obs.At
	}
	return d
}

func recorded(to lifecycle.Status, reason lifecycle.Reason, msg string) decision {
	return decision{verb: record, to: to, reason: reason, message: msg}
}

func failed(reason lifecycle.Reason, msg string) decision {
	return decision{verb: stopThenRecord, to: lifecycle.Failed, reason: reason, message: msg}
}

// acquiringFacts is what a cycle knows of a job holding its queue's slot
// before it asks the job's cluster anything.
type acquiringFacts struct {
	job     *falconv1.Job
	cluster string
	// registered: the job's cluster is in the registry.
	registered bool
	// unusable is why this controller cannot call the cluster's backend.
	unusable error
	// failing is the job's run of failed dispatches, if it is in one.
	failing *backoff
	// retry paces dispatches that fail (Retry.Dispatch).
	retry  RetryPolicy
	health Health
	// since is when acquiring began: the row's dispatched_at, else the
	// scheduler's clock (zero if neither knows).
	since time.Time
	now   time.Time
}

// planAcquiring decides on an acquiring job before its cluster is asked:
//   - its cluster was deleted (a deletion racing the pick): fail it now,
//     since nothing can observe, stop or bring it forward;
//   - this controller cannot call the backend: keep (the registry will say);
//   - its dispatch has failed for the retry window: give up — checked
//     before anything asks the cluster, since while it stays unreachable a
//     backoff or a failing observe would return first and the job would
//     hold its queue for as long as the outage lasts;
//   - its cluster is backing off: say so, keeping the slot and the
//     deadline (timing out means stopping it there);
//   - its timeout (counted from when acquiring began) passed: stop and fail;
//   - its last dispatch failed and the next try is not due: keep, to be
//     looked at again when it is (or at the timeout, if sooner);
//   - otherwise proceed, to be looked at again at the timeout.
func planAcquiring(f acquiringFacts) decision {
	reason := lifecycle.Reason(f.job.GetReason())
	switch {
	case !f.registered:
		return recorded(lifecycle.Failed, lifecycle.ReasonJobSubmitFailed, fmt.Sprintf("cluster %s is no longer registered (deleted while the job was being submitted to it); anything the job started there was not cleaned up", f.cluster))
	case f.unusable != nil:
		return decision{verb: keep}
	case f.failing != nil && !f.now.Before(f.failing.since.Add(f.retry.Window)):
		return decision{verb: giveUp, to: lifecycle.Failed, reason: lifecycle.ReasonJobSubmitFailed,
			message: fmt.Sprintf("submit to cluster %s failed for %s (%d attempts): %v", f.cluster, f.retry.Window, f.failing.attempts, f.failing.lastErr)}
	case f.health.Backoff:
		return recorded(lifecycle.Pending, reason, fmt.Sprintf("cluster %s is unreachable, retrying: %v", f.cluster, f.health.Err))
	}
	d := decision{verb: proceed}
	if t := f.job.GetTaskSpec().GetTimeoutSeconds(); t > 0 && !f.since.IsZero() {
		deadline := f.since.Add(time.Duration(t) * time.Second)
		if !f.now.Before(deadline) {
			return failed(lifecycle.ReasonTimeout, fmt.Sprintf("timed out after %ds waiting for resources on %s; the job was cancelled", t, f.cluster))
		}
		d.deadline = deadline
	}
	if f.failing != nil && f.now.Before(f.failing.next) {
		d.verb = keep
		if d.deadline.IsZero() || f.failing.next.Before(d.deadline) {
			d.deadline = f.failing.next
		}
	}
	return d
}

// planObserved decides on an acquiring job from what its cluster reports:
// still starting (or not found, after a dispatch) stays Dispatching with
// the backend's account; all replicas running is Running, which releases
// the queue's slot; finished before it was seen running is Succeeded (the
// cycle passes it through Running); failed is stopped and failed.
func planObserved(obs Observation) decision {
	if !releases(obs) {
		return recorded(lifecycle.Pending, lifecycle.ReasonDispatching, obs.Message)
	}
	switch obs.Phase {
	case PhaseRunning:
		return recorded(lifecycle.Running, "", obs.Message).dated(obs)
	case PhaseSucceeded:
		return recorded(lifecycle.Succeeded, "", obs.Message).dated(obs)
	}
	return failed(lifecycle.ReasonJobFailed, obs.Message).dated(obs)
}

// planPassThrough is the Running that a job first seen ended passes
// through on its way to Succeeded (the lifecycle has no shorter way),
// dated by when it began if its cluster says.
func planPassThrough(obs Observation) decision {
	d := recorded(lifecycle.Running, "", "")
	d.at = obs.Began
	return d
}

// progressGrace is how long a job being submitted goes without its pods'
// progress written ("0/1 pods running"): pods that start at once run
// before it has passed, and a write of their progress would be overwritten
// by their Running a moment later, one write per job for nobody. Pods
// that still do not run after it have their account written (an
// unschedulable pod says why).
const progressGrace = time.Second

// planProgress says when the progress of a job acquiring since since is
// written: at once (zero) once progressGrace has passed, else at the time
// returned. A job whose start is unknown is written at once.
func planProgress(since, now time.Time) time.Time {
	if since.IsZero() {
		return time.Time{}
	}
	if at := since.Add(progressGrace); now.Before(at) {
		return at
	}
	return time.Time{}
}

// releases reports whether what a slot holder's cluster reports frees its
// queue's slot: its pods all run, or it ended. It is planObserved's rule,
// which the deck applies before any cycle does.
func releases(obs Observation) bool {
	switch obs.Phase {
	case PhaseRunning, PhaseSucceeded, PhaseFailed:
		return true
	}
	return false
}

// reserveFacts is what a cycle knows of a queue whose slot is held, when
// it considers picking the next job ahead (deck).
type reserveFacts struct {
	// pooled: the cluster's backend manages node pools, and which pool
	// the next job takes is decided only when the slot is free.
	pooled bool
	// starts: the backend starts processes (Starter), one at a time in
	// the cycle, and frees the slot at once anyway.
	starts bool
	// cpu: the queue acquires nothing, so its slot is handed on at
	// submission already (noAcquisition).
	cpu bool
	// outOfService is why the cluster receives no new jobs, "" if none.
	outOfService string
	backoff      bool
}

// planReserve decides whether a queue's next job is picked ahead and
// recorded Next, to be submitted the moment the slot's holder releases it:
// only where submitting is all the job needs (no node pool, no process
// started by the cycle, something to acquire) on a cluster that takes new
// jobs and answers.
func planReserve(f reserveFacts) bool {
	return !f.pooled && !f.starts && !f.cpu && f.outOfService == "" && !f.backoff
}

// planDispatch decides what a submission's outcome means, and returns the
// job's dispatch-failure record as it must be kept (nil: none):
//   - it landed: proceed;
//   - the job changed since it was read (usually an abort): keep, for the
//     next cycle to see;
//   - no connection could be built (UnusableError): nothing was created,
//     so there is nothing to stop and waiting cannot fix a registration:
//     fail now;
//   - a failure that may pass (RetryableError): keep the job Dispatching,
//     its Message naming the error and when it is tried again (p paces the
//     tries), for p's window from the first failure; then stop and fail;
//   - any other refusal (invalid, forbidden): stop and fail now, with the
//     cluster's own words.
func planDispatch(cluster string, err error, failing *backoff, p RetryPolicy, now time.Time) (decision, *backoff) {
	var changed *changedError
	var retry *RetryableError
	var unusable *UnusableError
	switch {
	case err == nil:
		return decision{verb: proceed}, nil
	case errors.As(err, &changed):
		return decision{verb: keep}, failing
	case errors.As(err, &unusable):
		return recorded(lifecycle.Failed, lifecycle.ReasonJobSubmitFailed, fmt.Sprintf("submit to cluster %s failed: %v; nothing was created there (fix the cluster's registration with falcon cluster apply)", cluster, err)), failing
	case errors.As(err, &retry):
		f := retrying(p, now)
		if failing != nil {
			f = *failing
		}
		f.fail(err, now, p.Max)
		if now.Sub(f.since) < p.Window {
			return recorded(lifecycle.Pending, lifecycle.ReasonDispatching, fmt.Sprintf("submitting to cluster %s failed (attempt %d), retrying in %s, for up to %s: %v", cluster, f.attempts, f.interval, p.Window, err)), &f
		}
		// Worded as planAcquiring's give-up: which of the two sees the
		// window end first is a matter of timing.
		return failed(lifecycle.ReasonJobSubmitFailed, fmt.Sprintf("submit to cluster %s failed for %s (%d attempts): %v", cluster, p.Window, f.attempts, err)), &f
	}
	return failed(lifecycle.ReasonJobSubmitFailed, "submit to cluster "+cluster+" failed: "+err.Error()), failing
}

// runningFacts is what a cycle knows of a Running job before it asks its
// cluster.
type runningFacts struct {
	job      *falconv1.Job
	unusable error
	health   Health
	now      time.Time
}

// planRunning decides on a Running job before its cluster is asked: a
// cluster this controller cannot call, or one backing off, leaves it to be
// looked at once the cluster answers (a timeout that passes meanwhile is
// enforced then, since it means stopping the job there); a timeout counted
// from its start that has passed stops and fails it; otherwise proceed, to
// be looked at again at the timeout.
func planRunning(f runningFacts) decision {
	if f.unusable != nil || f.health.Backoff {
		return decision{verb: keep}
	}
	d := decision{verb: proceed}
	if t := f.job.GetTaskSpec().GetTimeoutSeconds(); t > 0 && f.job.GetStartedAt() != nil {
		deadline := f.job.GetStartedAt().AsTime().Add(time.Duration(t) * time.Second)
		if !f.now.Before(deadline) {
			return failed(lifecycle.ReasonTimeout, fmt.Sprintf("timed out after %ds; the job was stopped", t))
		}
		d.deadline = deadline
	}
	return d
}

// planRunningObserved decides on a Running job from what its cluster
// reports: finished, failed, or gone with no outcome (stopped and failed:
// its processes are gone); a pod that restarted or is being rescheduled
// reports Pending, and the job stays Running with the backend's account.
func planRunningObserved(obs Observation) decision {
	switch obs.Phase {
	case PhaseSucceeded:
		return recorded(lifecycle.Succeeded, "", obs.Message).dated(obs)
	case PhaseFailed:
		return failed(lifecycle.ReasonJobFailed, obs.Message).dated(obs)
	case PhaseUnknown:
		msg := obs.Message
		if msg == "" {
			msg = "the job's processes are gone and its outcome is unknown"
		}
		return failed(lifecycle.ReasonJobFailed, msg)
	}
	return recorded(lifecycle.Running, "", obs.Message)
}

// planAbort is what an Aborting job's end records, and whether its cluster
// must be asked to stop it first. A job that never began acquiring
// (dispatched_at is written before any pool or Job is asked for) has
// nothing on its cluster to stop, even when pinned there: its abort must
// not wait for a cluster that may be unreachable — unless the deck
// submitted it while it was next in line (submitted: its create is in
// flight or returned, not yet recorded). Aborted carries no Reason
// (000 section 9); the Message keeps why, including a sibling stop's
// "stopped because role X failed".
func planAbort(j *falconv1.Job, submitted bool) decision {
	msg := j.GetMessage()
	if msg == "" {
		msg = "aborted"
	}
	if j.GetClusterName() != "" && (reachedCluster(j) || submitted) {
		return decision{verb: stopThenRecord, to: lifecycle.Aborted, message: msg}
	}
	return recorded(lifecycle.Aborted, "", msg)
}

// stopWait says whether a stop that failed before may be asked again now;
// if not, when it may.
func stopWait(st *backoff, now time.Time) (time.Time, bool) {
	if st != nil && now.Before(st.next) {
		return st.next, true
	}
	return time.Time{}, false
}

// planStopOutcome decides what a stop's outcome means: done (the caller may
// record the job's end) with the Message to record, and the job's stop
// backoff as it must be kept (nil: none). stopErr is the stop's error, or,
// when the cluster's backend is backing off (and so was not asked),
// why it is unreachable. A failed stop is asked again as p paces it (a
// backend backing off paces itself, so its turns are not counted) for p's
// window from the first failure; then the outcome is recorded anyway,
// saying the cluster never confirmed the stop, so that no job waits for
// ever on a cluster that is gone.
func planStopOutcome(cluster, msg string, prev *backoff, stopErr error, backingOff bool, p RetryPolicy, now time.Time) (done bool, outcome string, next *backoff) {
	if stopErr == nil {
		return true, msg, nil
	}
	st := retrying(p, now)
	if prev != nil {
		st = *prev
	}
	if backingOff {
		st.lastErr = stopErr
	} else {
		st.fail(stopErr, now, p.Max)
	}
	if now.Sub(st.since) >= p.Window {
		return true, fmt.Sprintf("%s; cluster %s never confirmed the stop (%d attempts over %s): %v; anything the job started there may still be running", msg, cluster, st.attempts, p.Window, stopErr), &st
	}
	return false, msg, &st
}

// Position messages: the next in line is told at once; the rest of the
// front of a queue (up to exactPositions) at most every nearRefresh, and
// further back at most every tailRefresh. Every pick moves every waiting
// job up by one, so rewriting all of them each time would cost a write per
// waiting job per dispatch, each echoed back to the manager and mirrored
// on its experiment. Even the front every second was most of the writes
// of a busy queue: 7,900 position writes and 4,900 experiment mirrors for
// 1,000 jobs over 12 queues, against 5,000 writes that moved a job. Kueue
// shows a ClusterQueue's first 10 pending workloads, refreshed every 5 s,
// for the same reason; a job second in line still sees the queue move.
const (
	exactPositions = 10
	nearRefresh    = 5 * time.Second
	tailRefresh    = 30 * time.Second
)

// queueFacts is what a cycle knows of one queue when it writes positions.
type queueFacts struct {
	cluster string
	waiting []queue.Position // in queue order
	// jobs are the live jobs by ID.
	jobs map[string]*falconv1.Job
	// written is the position last written for each job (a job missing has
	// none this controller wrote).
	written map[string]int
	// unreachable is why the queue's cluster cannot be reached, if so: a
	// job waiting there says so, or it would only see its queue not move.
	unreachable error
	// refreshNear: the positions behind the next in line, up to
	// exactPositions, are due again.
	refreshNear bool
	// refreshTail: the positions behind exactPositions are due again.
	refreshTail bool
}

// positionWrite is one waiting job's position message to write.
type positionWrite struct {
	job *falconv1.Job
	pos int
	msg string
}

// planPositions lists the position messages to write in one queue: every
// waiting job whose message differs from what it should say, except those
// whose position this controller wrote before and is not due again: behind
// the next in line until refreshNear, past exactPositions until
// refreshTail.
func planPositions(q queueFacts) []positionWrite {
	var out []positionWrite
	suffix := ""
	if q.unreachable != nil {
		suffix = fmt.Sprintf("; cluster %s is unreachable: %v", q.cluster, q.unreachable)
	}
	for _, p := range q.waiting {
		if _, placed := q.written[p.ID]; placed && !q.refreshTail {
			if p.Pos > exactPositions {
				continue // most of a long queue: one lookup each
			}
			if p.Pos > 1 && !q.refreshNear {
				continue
			}
		}
		j := q.jobs[p.ID]
		if j == nil || j.GetStatus() != string(lifecycle.Pending) || acquiring(j) || j.GetReason() == string(lifecycle.ReasonNext) {
			continue // a job picked ahead never goes back to Waiting (lifecycle.PendingPhases)
		}
		msg := p.Message() + suffix
		if j.GetReason() == string(lifecycle.ReasonWaiting) && j.GetMessage() == msg {
			continue
		}
		out = append(out, positionWrite{job: j, pos: p.Pos, msg: msg})
	}
	return out
}

// PoolFacts is what a cycle knows of one cluster's pools when it decides
// which to keep. It is exported, with PlanPools, so that the what-if
// simulator (internal/sim) drives the controller's own rule.
type PoolFacts struct {
	// Pools oldest first: the order reuse takes them in, so the pools kept
	// for waiting jobs are the ones the next picks will take.
	Pools []Pool
	// Owner is the live job owning each pool ("" or missing: none).
	Owner map[string]string
	// Demand counts the jobs waiting on this cluster, by shape.
	Demand map[queue.Pool]int
	Now    time.Time
	// Grace protects a young pool still being created (see PoolTiming).
	Grace time.Duration
	// NoReuse: every pool is deleted once its job ends (WithoutPoolReuse).
	NoReuse bool
	// Linger keeps an idle Ready pool nobody waits for until it has been
	// idle this long (WithPoolLinger), betting that a job of its shape
	// arrives before then; 0 deletes it at once, as 000 section 5 says.
	Linger time.Duration
	// IdleSince is when each pool was first seen without an owner; a pool
	// missing has just become idle (Now).
	IdleSince map[string]time.Time
}

// PoolVerb is what PlanPools says of one pool.
type PoolVerb int

const (
	PoolOwned    PoolVerb = iota // a live job owns it
	PoolKept                     // idle, kept for a waiting job, while young, or lingering
	PoolDeleting                 // already being deleted: left alone
	PoolDelete                   // idle and unwanted: delete it
)

func (v PoolVerb) String() string {
	return [...]string{"owned", "kept", "deleting", "delete"}[v]
}

// PoolDecision is PlanPools' answer for one pool.
type PoolDecision struct {
	Pool Pool
	Verb PoolVerb
	// Deadline is when the pool must be looked at again (a young pool's
	// grace or a lingering pool's linger ending); zero for none.
	Deadline time.Time
}

// PlanPools decides, level-triggered, on every pool of one cluster: one no
// live job owns is kept while a job waiting on this cluster can use it
// (one waiting job, one pool kept for it; the next pick takes it), or while
// it is young and still being created (it may be one a controller created
// just before it crashed, about to be adopted), or, with Linger, while it
// is Ready and has been idle for less than Linger; otherwise it is deleted.
func PlanPools(f PoolFacts) []PoolDecision { return AppendPoolPlan(nil, f) }

// AppendPoolPlan is PlanPools appending its decisions to dst, for a caller
// that plans at every step and reuses one slice (the what-if simulator
// plans millions of times a run, and allocating each answer dominated it).
func AppendPoolPlan(dst []PoolDecision, f PoolFacts) []PoolDecision {
	// kept counts the pools kept for waiting jobs so far, by shape: one
	// waiting job, one pool. Allocated at the first, since most cycles
	// keep none.
	var kept map[queue.Pool]int
	keep := func(shape queue.Pool) {
		if kept == nil {
			kept = map[queue.Pool]int{}
		}
		kept[shape]++
	}
	out := dst
	if out == nil {
		out = make([]PoolDecision, 0, len(f.Pools))
	}
	for _, p := range f.Pools {
		d := PoolDecision{Pool: p, Verb: PoolDelete}
		shape := queue.Pool{AcceleratorType: p.AcceleratorType, Topology: p.Topology}
		wanted := !f.NoReuse && f.Demand[shape]-kept[shape] > 0
		young := f.Now.Sub(p.CreatedAt) < f.Grace
		idleSince, seen := f.IdleSince[p.Name]
		if !seen {
			idleSince = f.Now
		}
		lingering := !f.NoReuse && f.Linger > 0 && f.Now.Sub(idleSince) < f.Linger
		switch {
		case f.Owner[p.Name] != "":
			d.Verb = PoolOwned
		case p.State == lifecycle.PoolDeleting:
			d.Verb = PoolDeleting
		case p.State == lifecycle.PoolReady && wanted:
			keep(shape)
			d.Verb = PoolKept
		case p.State == lifecycle.PoolReady && lingering:
			d.Verb = PoolKept
			d.Deadline = idleSince.Add(f.Linger)
		case p.State == lifecycle.PoolProvisioning && (wanted || young):
			if wanted {
				keep(shape)
			}
			d.Verb = PoolKept
			if young {
				d.Deadline = p.CreatedAt.Add(f.Grace)
			}
		}
		out = append(out, d)
	}
	return out
}

// planUnplaceable decides on a waiting job that selection could place
// nowhere (sel is its record, err the selection's refusal):
//   - no cluster could ever take it, because none offers its accelerator
//     type (a pinned job: its cluster no longer does): fail it now with
//     design 001's NoAvailableClusterError text, every cluster's probe
//     included, rather than keep it waiting for a registration nobody
//     may make;
//   - otherwise capacity may come back (a cluster offering the type is in
//     maintenance, offline or unreachable, or its queue is full): it
//     waits, and its message says why, cluster by cluster.
//
// A job pinned to a cluster out of service does not get here: the cycle
// says it waits for that cluster before selecting.
func planUnplaceable(sel queue.Selection, err *queue.UnplaceableError, pin string) decision {
	var why []string
	for _, c := range sel.Candidates {
		if c.Offers && (pin == "" || c.Cluster == pin) {
			why = append(why, c.Cluster+": "+c.Rejected)
		}
	}
	if len(why) == 0 {
		return recorded(lifecycle.Failed, lifecycle.ReasonJobSubmitFailed,
			(&queue.NoAvailableClusterError{Selection: sel}).Error()+"; register a cluster that offers it (falcon cluster apply) and run the experiment again")
	}
	msg := err.Message
	if err.Reason != queue.NoAvailableCluster { // that text names every cluster already
		msg += " (" + strings.Join(why, "; ") + ")"
	}
	return recorded(lifecycle.Pending, lifecycle.ReasonWaiting, msg+"; the job waits until one can take it")
}

// planPoolFailure decides on a job whose pool will never be ready (pe,
// from the backend's look at pool):
//   - the job took the pool over (it was created for a job that ended):
//     its failure is not this job's, which proceeds to create a pool of
//     its own, its message beginning with what became of the one it took;
//   - otherwise the job fails with the pool's reason and message.
func planPoolFailure(pe *PoolError, pool string, tookOver bool) decision {
	if tookOver {
		return decision{verb: proceed, message: fmt.Sprintf("node pool %s, taken over from a job that ended, failed (%s); ", pool, pe.Message)}
	}
	return failed(pe.Reason, pe.Message)
}

// planLeftover says whether what a job left on its cluster is to be
// removed: found is whether its row exists, row is it then; pooled is
// whether the cluster's node pools are shared (a job's end deletes its
// objects there); active is whether something of it may still run. A job
// that is live is the cycle's, never a leftover. Where pools are shared,
// everything an ended job left goes. Elsewhere a finished Job is kept for
// its user until its TTL, so only what still runs goes, and never a
// Succeeded job's: all of it finished. A row that is gone (its experiment
// deleted) leaves objects nobody owns.
func planLeftover(row *falconv1.Job, found, pooled, active bool) bool {
	switch {
	case !found:
		return true
	case live(row):
		return false
	case pooled:
		return true
	}
	return active && row.GetStatus() != string(lifecycle.Succeeded)
}

// Leftover stops are asked again with backoff, from leftoverRetryMin up to
// leftoverRetryMax between tries, for as long as this controller lives; a
// restart hands what is still there to the resync's sweep.
const (
	leftoverRetryMin = time.Second
	leftoverRetryMax = 5 * time.Minute
)

// planLeftoverRetry is when to ask again after a leftover's stop failed.
func planLeftoverRetry(prev *backoff, err error, now time.Time) *backoff {
	st := backoff{since: now, interval: leftoverRetryMin / 2}
	if prev != nil {
		st = *prev
	}
	st.fail(err, now, leftoverRetryMax)
	return &st
}
