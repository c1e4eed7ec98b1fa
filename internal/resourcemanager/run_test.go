package resourcemanager_test

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/metrics"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// histogram reads one of the manager's histograms: samples and their sum
// (for falcon_rm_cycle_jobs: cycles run, jobs looked at). A labelled one
// is read at the series whose labels have the values of labelValues
// (name, value, ...); a series without samples yet reads 0, 0.
func histogram(tb testing.TB, reg *prometheus.Registry, name string, labelValues ...string) (uint64, float64) {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m.GetLabel(), labelValues) {
				var h *dto.Histogram = m.GetHistogram()
				return h.GetSampleCount(), h.GetSampleSum()
			}
		}
		return 0, 0
	}
	if len(labelValues) > 0 {
		return 0, 0 // a vector shows no series before its first sample
	}
	tb.Fatalf("%s not registered", name)
	return 0, 0
}

func hasLabels(got []*dto.LabelPair, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		if !slices.ContainsFunc(got, func(l *dto.LabelPair) bool { return l.GetName() == want[i] && l.GetValue() == want[i+1] }) {
			return false
		}
	}
	return true
}

func cycleJobs(t *testing.T, reg *prometheus.Registry) (uint64, float64) {
	return histogram(t, reg, "falcon_rm_cycle_jobs")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRunning waits until every one of jobs is Running.
func waitRunning(t *testing.T, env *apitest.Env, jobs []string) {
	t.Helper()
	waitFor(t, "every job Running", func() bool {
		for _, id := range jobs {
			if env.Job(t, id).GetStatus() != "Running" {
				return false
			}
		}
		return true
	})
}

// waitQuiet waits for the manager to go quiet: no cycle for 50 ms, the
// echoes of its writes settled.
func waitQuiet(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	waitFor(t, "the manager to go quiet", func() bool {
		c1, _ := cycleJobs(t, reg)
		time.Sleep(50 * time.Millisecond)
		c2, _ := cycleJobs(t, reg)
		return c1 == c2
	})
}

// Run follows the change feed: once its snapshot is read, a cycle looks at
// the jobs that changed or that a backend reported, not at every live job,
// and a backend's report (Touch) is acted on at once — the safety-net poll
// and the resync are an hour away, so nothing else could explain it.
func TestRunLooksOnlyAtWhatChanged(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "test"})
	be := newScripted()
	reg := prometheus.NewRegistry()
	mgr := resourcemanager.New(env.Conn, resourcemanager.WithBackend("test", be),
		resourcemanager.WithMetrics(metrics.NewRM(reg)),
		resourcemanager.WithInterval(time.Hour), resourcemanager.WithResync(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	const n = 40
	var jobs []string
	for i := range n {
		exp := env.Create(t, fmt.Sprintf("run-%d", i), map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
		jobs = append(jobs, exp.GetJobs()[0].GetId())
	}
	// Created through the API: the feed wakes the manager, which
	// dispatches each (the scripted backend runs them at once).
	waitRunning(t, env, jobs)
	// Let the echoes of those writes settle: a cycle that reads nothing.
	waitQuiet(t, reg)

	// A running job's news (a new message) is the cycle's: one cycle,
	// at that job alone.
	c0, j0 := cycleJobs(t, reg)
	calls0 := be.callCount()
	be.set(jobs[7], resourcemanager.PhaseRunning, "1/1 running, 1 restart")
	mgr.Touch(jobs[7])
	waitFor(t, "the touched job's message", func() bool { return env.Job(t, jobs[7]).GetMessage() == "1/1 running, 1 restart" })
	waitQuiet(t, reg)
	c1, j1 := cycleJobs(t, reg)
	if looked := j1 - j0; looked != 1 || c1-c0 != 1 {
		t.Errorf("%d cycles looked at %.0f jobs to act on one report among %d live jobs; want one cycle, at the touched job alone (the echo of the manager's own write is no news to it)", c1-c0, looked, n)
	}
	if calls := be.callCount() - calls0; calls > 3 {
		t.Errorf("the backend was called %d times for one job's report; the other %d jobs were observed too", calls, n-1)
	}
	// A running job's success is recorded before any cycle (ends): the
	// one cycle that follows folds the row and looks at no job.
	c0, j0 = c1, j1
	calls0 = be.callCount()
	be.set(jobs[8], resourcemanager.PhaseSucceeded, "exit 0")
	mgr.Touch(jobs[8])
	waitFor(t, "the touched job Succeeded", func() bool { return env.Job(t, jobs[8]).GetStatus() == "Succeeded" })
	// The cycle that folds the row starts once the write has returned,
	// a moment after the row is visible.
	waitFor(t, "a cycle after the end", func() bool { c, _ := cycleJobs(t, reg); return c > c0 })
	waitQuiet(t, reg)
	c1, j1 = cycleJobs(t, reg)
	if looked := j1 - j0; looked != 0 || c1-c0 != 1 {
		t.Errorf("%d cycles looked at %.0f jobs after a job's success was recorded at once; want one cycle, at no job", c1-c0, looked)
	}
	if calls := be.callCount() - calls0; calls != 1 {
		t.Errorf("the backend was called %d times to record one job's success; want one look", calls)
	}
	if got := metric(t, reg, "falcon_rm_ends_ahead_total"); got != 1 {
		t.Errorf("falcon_rm_ends_ahead_total = %v, want 1", got)
	}
	for i, id := range jobs {
		want := map[bool]string{true: "Succeeded", false: "Running"}[i == 8]
		if got := env.Job(t, id).GetStatus(); got != want {
			t.Errorf("job %d is %s, want %s", i, got, want)
		}
	}
	if got := env.Job(t, jobs[8]).GetMessage(); got != "exit 0" {
		t.Errorf("the recorded end says %q, want the backend's %q", got, "exit 0")
	}
}

// Shutdown lets the cycle in flight finish its writes — here a dispatch
// blocked inside the backend — and then Run returns without starting
// another; Run's context was never cancelled.
func TestShutdownDrainsTheCycleInFlight(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "test"})
	be := newScripted()
	inDispatch, release := make(chan struct{}), make(chan struct{})
	be.onDispatch = func(*falconv1.Job) {
		be.onDispatch = nil
		close(inDispatch)
		be.mu.Unlock() // let the test read the backend while this call waits
		<-release
		be.mu.Lock()
	}
	mgr := resourcemanager.New(env.Conn, resourcemanager.WithBackend("test", be), resourcemanager.WithInterval(time.Hour))
	exp := env.Create(t, "drain", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	done := make(chan error)
	go func() { done <- mgr.Run(context.Background()) }()
	<-inDispatch
	drained := make(chan error)
	go func() { drained <- mgr.Shutdown(context.Background()) }()
	select {
	case err := <-drained:
		t.Fatalf("Shutdown returned (%v) while a cycle was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if j := env.Job(t, exp.GetJobs()[0].GetId()); j.GetStatus() != "Running" {
		t.Fatalf("the drained cycle left the job %s/%s, want its write (Running) done", j.GetStatus(), j.GetReason())
	}
	// A Shutdown whose time runs out says so.
	mgr2 := resourcemanager.New(env.Conn, resourcemanager.WithBackend("test", be))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := mgr2.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown of a manager that never ran, with its time up, returned nil")
	}
}

// Under Run a submission leaves the cycle (submitter): while a create is
// in flight other cycles run, an abort of that job waits for the create to
// return before it stops the job (a stop first would leave the Job the
// create then made), and a submission that fails is looked at again at
// once rather than at the next poll, an hour away here.
// held is a manager under Run whose backend holds the first create until
// free is called.
type held struct {
	env        *apitest.Env
	be         *scripted
	mgr        *resourcemanager.Manager
	reg        *prometheus.Registry
	inDispatch chan struct{} // closed once the create is held
	free       func()
	// stoppedDuring is how often the held job had been stopped when its
	// create was let go (under be.mu).
	stoppedDuring int
}

func startHeld(t *testing.T) *held {
	h := &held{env: apitest.Start(t, map[string]string{"local": "test"}), be: newScripted(),
		reg: prometheus.NewRegistry(), inDispatch: make(chan struct{}), stoppedDuring: -1}
	release := make(chan struct{})
	h.be.onDispatch = func(j *falconv1.Job) {
		h.be.onDispatch = nil
		close(h.inDispatch)
		h.be.mu.Unlock()
		<-release
		h.be.mu.Lock()
		h.stoppedDuring = h.be.stopped[j.GetId()]
	}
	h.mgr = resourcemanager.New(h.env.Conn, resourcemanager.WithBackend("test", h.be),
		resourcemanager.WithMetrics(metrics.NewRM(h.reg)),
		resourcemanager.WithInterval(time.Hour), resourcemanager.WithResync(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- h.mgr.Run(ctx) }()
	var once sync.Once
	h.free = func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { h.free(); cancel(); <-done }) // Run waits for the held create
	return h
}

func TestSubmissionsLeaveTheCycle(t *testing.T) {
	h := startHeld(t)
	env, be, mgr, reg, ctx := h.env, h.be, h.mgr, h.reg, context.Background()

	exp := env.Create(t, "held", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	job := exp.GetJobs()[0].GetId()
	<-h.inDispatch
	if _, err := env.Exps.AbortExp(ctx, &falconv1.AbortExpRequest{Id: exp.GetId(), Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	// Cycles go on while the create is held: the abort's change wakes one,
	// and touches wake more, none of which may stop the job.
	c0, _ := cycleJobs(t, reg)
	for i := 0; i < 3; i++ {
		mgr.Touch(job)
		waitFor(t, "a cycle while the create is held", func() bool { c, _ := cycleJobs(t, reg); return c > c0 })
		c0, _ = cycleJobs(t, reg)
	}
	if j := env.Job(t, job); j.GetStatus() != "Aborting" {
		t.Fatalf("job is %s/%s while its create is in flight, want Aborting", j.GetStatus(), j.GetReason())
	}
	h.free()
	waitFor(t, "the job Aborted", func() bool { return env.Job(t, job).GetStatus() == "Aborted" })
	be.mu.Lock()
	stopped := be.stopped[job]
	be.mu.Unlock()
	if h.stoppedDuring != 0 || stopped == 0 {
		t.Fatalf("stopped %d times while its create was in flight and %d in all; want 0, then at least 1", h.stoppedDuring, stopped)
	}

	// A failed submission comes back at once: its retry is written with
	// the error named.
	be.mu.Lock()
	be.dispatchErr = resourcemanager.Retryable(fmt.Errorf("apiserver said no"))
	be.mu.Unlock()
	exp = env.Create(t, "refused", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	job = exp.GetJobs()[0].GetId()
	waitFor(t, "the retry written", func() bool {
		j := env.Job(t, job)
		return strings.Contains(j.GetMessage(), "apiserver said no")
	})
}

// An abort forced while a job's create is in flight ends the job at once;
// the create then lands on a cluster nobody will ask again. The manager
// stops what it created once the create returns, never during it (a stop
// racing the create could leave the Job behind).
func TestForcedAbortDuringTheCreate(t *testing.T) {
	h := startHeld(t)
	env, be, reg, ctx := h.env, h.be, h.reg, context.Background()
	exp := env.Create(t, "held", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	job := exp.GetJobs()[0].GetId()
	<-h.inDispatch
	c0, _ := cycleJobs(t, reg)
	if _, err := env.Exps.AbortExp(ctx, &falconv1.AbortExpRequest{Id: exp.GetId(), Reason: "test", Force: true}); err != nil {
		t.Fatal(err)
	}
	if j := env.Job(t, job); j.GetStatus() != "Aborted" {
		t.Fatalf("job is %s after a forced abort, want Aborted", j.GetStatus())
	}
	waitFor(t, "the cycle the forced abort wakes", func() bool { c, _ := cycleJobs(t, reg); return c > c0 })
	h.free()
	waitFor(t, "the job's create stopped", func() bool {
		be.mu.Lock()
		defer be.mu.Unlock()
		return be.stopped[job] > 0
	})
	be.mu.Lock()
	defer be.mu.Unlock()
	if h.stoppedDuring != 0 {
		t.Fatalf("stopped %d times while its create was in flight, want 0", h.stoppedDuring)
	}
}

// A write the store refuses because the row changed under the snapshot has
// the manager read the job again: here the abort is written to the store
// directly, as another API server replica would, so no change feed carries
// it, and the resync is an hour away. The backend's report of the job's end
// makes the manager write Succeeded over Running; the store refuses it (the
// row is Aborting), and the job is read again, stopped and Aborted rather
// than retried against the stale row.
func TestRefusedWriteReadsTheJobAgain(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "test"})
	be := newScripted()
	mgr := resourcemanager.New(env.Conn, resourcemanager.WithBackend("test", be),
		resourcemanager.WithInterval(time.Hour), resourcemanager.WithResync(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	exp := env.Create(t, "elsewhere", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	job := exp.GetJobs()[0].GetId()
	waitFor(t, "the job Running", func() bool { return env.Job(t, job).GetStatus() == "Running" })
	if _, changed, err := env.Store.AbortExp(ctx, exp.GetId(), "aborted through another server"); err != nil || !changed {
		t.Fatalf("abort in the store: changed %t, %v", changed, err)
	}
	be.set(job, resourcemanager.PhaseSucceeded, "exit 0")
	mgr.Touch(job)
	waitFor(t, "the job Aborted", func() bool { return env.Job(t, job).GetStatus() == "Aborted" })
	be.mu.Lock()
	stopped := be.stopped[job]
	be.mu.Unlock()
	if stopped == 0 {
		t.Fatal("the job was recorded Aborted without being stopped on its cluster")
	}
}

// Between resyncs a cycle reuses the clusters an earlier one read, so a
// backend's report is acted on without a read of the registry; a change to
// a cluster (on the feed) and the list's age each make a cycle read it
// again.
func TestRunReadsTheClustersWhenTheyMayHaveChanged(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "test"})
	be := newScripted()
	reg := prometheus.NewRegistry()
	conn := apitest.CountCalls(env.Conn)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	mgr := resourcemanager.New(conn, resourcemanager.WithBackend("test", be), resourcemanager.WithClock(clock),
		resourcemanager.WithMetrics(metrics.NewRM(reg)),
		resourcemanager.WithInterval(time.Hour), resourcemanager.WithResync(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	var jobs []string
	for i := range 3 {
		exp := env.Create(t, fmt.Sprintf("clusters-%d", i), map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
		jobs = append(jobs, exp.GetJobs()[0].GetId())
	}
	waitRunning(t, env, jobs)
	waitQuiet(t, reg)
	cycles := func() uint64 { c, _ := cycleJobs(t, reg); return c }

	// A report: acted on with no read of the clusters.
	conn.Take()
	c0 := cycles()
	be.set(jobs[0], resourcemanager.PhaseSucceeded, "exit 0")
	mgr.Touch(jobs[0])
	waitFor(t, "the reported job Succeeded", func() bool { return env.Job(t, jobs[0]).GetStatus() == "Succeeded" })
	waitQuiet(t, reg)
	if calls := conn.Take(); calls["ListClusters"] != 0 || cycles() == c0 {
		t.Errorf("%d cycles for a report read the clusters %d times, want none (calls: %v)", cycles()-c0, calls["ListClusters"], calls)
	}

	// A cluster's change: the feed makes the next cycle read them.
	if _, err := falconv1.NewClusterServiceClient(env.UserConn).SetClusterStatus(ctx, &falconv1.SetClusterStatusRequest{Name: "local", Status: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the clusters read after their change", func() bool { return conn.Count("ListClusters") > 0 })
	waitQuiet(t, reg)

	// The list's age: a report a second later reads them again.
	conn.Take()
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	be.set(jobs[1], resourcemanager.PhaseSucceeded, "exit 0")
	mgr.Touch(jobs[1])
	waitFor(t, "the second reported job Succeeded", func() bool { return env.Job(t, jobs[1]).GetStatus() == "Succeeded" })
	waitQuiet(t, reg)
	if n := conn.Count("ListClusters"); n != 1 {
		t.Errorf("a report after the list aged read the clusters %d times, want once", n)
	}
}

// lostAnswer makes the first UpdateJobStatuses land and then fail as a
// connection cut before its answer would: the write is in the store, the
// manager does not know it. It keeps the ListJobs requests made after.
type lostAnswer struct {
	grpc.ClientConnInterface
	mu    sync.Mutex
	lost  bool
	after []*falconv1.ListJobsRequest
}

func (l *lostAnswer) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	err := l.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch m := path.Base(method); {
	case m == "UpdateJobStatuses" && !l.lost && err == nil:
		l.lost = true
		return status.Error(codes.Unavailable, "connection cut before the answer")
	case m == "ListJobs" && l.lost:
		l.after = append(l.after, args.(*falconv1.ListJobsRequest))
	}
	return err
}

// A write whose answer was lost may have landed, and its echo, which the
// manager skips as its own, would not say: the manager reads the job's
// experiment again, and the job goes on from what the store holds.
func TestALostAnswerReadsTheJobAgain(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "test"})
	be := newScripted()
	lossy := &lostAnswer{ClientConnInterface: env.Conn}
	mgr := resourcemanager.New(lossy, resourcemanager.WithBackend("test", be),
		resourcemanager.WithInterval(time.Hour), resourcemanager.WithResync(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	exp := env.Create(t, "lost", map[string]*falconv1.TaskSpec{"main": slotTask})
	job := exp.GetJobs()[0].GetId()
	waitFor(t, "the job Running", func() bool { return env.Job(t, job).GetStatus() == "Running" })
	lossy.mu.Lock()
	defer lossy.mu.Unlock()
	if !lossy.lost {
		t.Fatal("no write lost its answer")
	}
	// The lost write was the pick's: after it, the experiment is read again
	// by ID, not left to the echo the manager skips.
	reread := false
	for _, r := range lossy.after {
		reread = reread || slices.Contains(r.GetExpIds(), exp.GetId())
	}
	if !reread {
		t.Errorf("after the lost answer the experiment was never read again (ListJobs calls: %v)", lossy.after)
	}
}
