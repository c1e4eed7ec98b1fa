package resourcemanager_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/metrics"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// scripted is a Backend whose jobs do what the test says. The resource
// manager's own interface is the edge here; the API server behind it is real.
type scripted struct {
	mu          sync.Mutex
	phase       map[string]resourcemanager.Observation
	dispatched  map[string]*falconv1.Job
	clusters    map[string][]string // job -> the clusters of its every Dispatch
	stopped     map[string]int
	dispatchErr error
	stopErr     error
	startPhase  resourcemanager.Phase // what a new job reports first; Running if empty
	onDispatch  func(j *falconv1.Job)
	health      resourcemanager.Health // of every cluster
	calls       int                    // Dispatch, Observe and Stop
}

var _ resourcemanager.HealthReporter = (*scripted)(nil)

func (s *scripted) Health(*falconv1.Cluster) resourcemanager.Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.health
}

func (s *scripted) setHealth(h resourcemanager.Health) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health = h
}

func (s *scripted) stopCount(job string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped[job]
}

func (s *scripted) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func newScripted() *scripted {
	return &scripted{phase: map[string]resourcemanager.Observation{}, dispatched: map[string]*falconv1.Job{},
		clusters: map[string][]string{}, stopped: map[string]int{}}
}

func (s *scripted) Dispatch(_ context.Context, c *falconv1.Cluster, j *falconv1.Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.clusters[j.GetId()] = append(s.clusters[j.GetId()], c.GetName())
	if s.dispatchErr != nil {
		return s.dispatchErr
	}
	if _, ok := s.dispatched[j.GetId()]; !ok {
		s.dispatched[j.GetId()] = proto.Clone(j).(*falconv1.Job)
		p := s.startPhase
		if p == "" {
			p = resourcemanager.PhaseRunning
		}
		s.phase[j.GetId()] = resourcemanager.Observation{Phase: p, Message: "1/1 running"}
	}
	if s.onDispatch != nil {
		s.onDispatch(j)
	}
	return nil
}

func (s *scripted) Observe(_ context.Context, _ *falconv1.Cluster, j *falconv1.Job) (resourcemanager.Observation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if o, ok := s.phase[j.GetId()]; ok {
		return o, nil
	}
	return resourcemanager.Observation{Phase: resourcemanager.PhaseUnknown}, nil
}

func (s *scripted) Stop(_ context.Context, _ *falconv1.Cluster, j *falconv1.Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.stopped[j.GetId()]++
	if s.stopErr != nil {
		return s.stopErr
	}
	s.phase[j.GetId()] = resourcemanager.Observation{Phase: resourcemanager.PhaseFailed, Message: "killed"}
	return nil
}

func (s *scripted) set(id string, p resourcemanager.Phase, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase[id] = resourcemanager.Observation{Phase: p, Message: msg}
}

type fixture struct {
	env *apitest.Env
	be  *scripted
	now time.Time
	mgr *resourcemanager.Manager
	n   int
	// calls counts the manager's calls to the API server.
	calls *apitest.Calls
}

func setup(t *testing.T, opts ...resourcemanager.Option) *fixture {
	f := &fixture{env: apitest.Start(t, map[string]string{"local": "test"}), be: newScripted(), now: time.Now()}
	f.calls = apitest.CountCalls(f.env.Conn)
	f.mgr = resourcemanager.New(f.calls, append([]resourcemanager.Option{resourcemanager.WithBackend("test", f.be),
		resourcemanager.WithClock(func() time.Time { return f.now })}, opts...)...)
	return f
}

func (f *fixture) cycle(t *testing.T) {
	t.Helper()
	if _, err := f.mgr.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) one(t *testing.T, task *falconv1.TaskSpec) (expID, jobID string) {
	f.n++
	exp := f.env.Create(t, fmt.Sprintf("exp-%d", f.n), map[string]*falconv1.TaskSpec{"main": task})
	return exp.GetId(), exp.GetJobs()[0].GetId()
}

func want(t *testing.T, j *falconv1.Job, status, reason, msgPart string) {
	t.Helper()
	if j.GetStatus() != status || j.GetReason() != reason || !strings.Contains(j.GetMessage(), msgPart) {
		t.Fatalf("job is %s/%s %q, want %s/%s containing %q", j.GetStatus(), j.GetReason(), j.GetMessage(), status, reason, msgPart)
	}
}

func TestDispatchRunsAndSucceeds(t *testing.T) {
	f := setup(t)
	_, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	f.cycle(t)
	j := f.env.Job(t, job)
	want(t, j, "Running", "", "1/1 running")
	if j.GetClusterName() != "local" || j.GetStartedAt() == nil {
		t.Fatalf("running job: cluster %q started_at %v", j.GetClusterName(), j.GetStartedAt())
	}
	if got := f.be.dispatched[job].GetConfig(); !strings.HasPrefix(got, "cfg-") {
		t.Fatalf("backend got config %q, want the experiment's config", got)
	}
	f.be.set(job, resourcemanager.PhaseSucceeded, "")
	f.cycle(t)
	want(t, f.env.Job(t, job), "Succeeded", "", "")
}

func TestBackendOutcomes(t *testing.T) {
	tests := []struct {
		name                  string
		phase                 resourcemanager.Phase
		msg                   string
		status, reason, inMsg string
	}{
		{"exit code", resourcemanager.PhaseFailed, "rank 0 exited with code 3", "Failed", "JobFailed", "code 3"},
		{"vanished", resourcemanager.PhaseUnknown, "", "Failed", "JobFailed", "gone"},
		{"progress", resourcemanager.PhaseRunning, "2/2 running", "Running", "", "2/2 running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			_, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
			f.cycle(t)
			if tt.phase == resourcemanager.PhaseUnknown {
				delete(f.be.phase, job)
			} else {
				f.be.set(job, tt.phase, tt.msg)
			}
			f.cycle(t)
			want(t, f.env.Job(t, job), tt.status, tt.reason, tt.inMsg)
		})
	}
}

func TestSubmitFailure(t *testing.T) {
	f := setup(t)
	f.be.dispatchErr = errors.New("admission webhook denied")
	_, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	f.cycle(t)
	want(t, f.env.Job(t, job), "Failed", "JobSubmitFailed", "admission webhook denied")
}

// A dispatch that fails for a reason that may pass (the cluster unreachable,
// a credential being refreshed) is retried with backoff, never by every
// cycle that looks at the job; the job fails only once the failures have
// lasted the policy's window.
func TestRetryableSubmitFailure(t *testing.T) {
	f := setup(t)
	f.be.dispatchErr = resourcemanager.Retryable(errors.New("Unauthorized"))
	_, recovers := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	f.cycle(t)
	want(t, f.env.Job(t, recovers), "Pending", "Dispatching", "failed (attempt 1), retrying in 1s, for up to 5m0s: Unauthorized")
	f.cycle(t) // within the backoff: not submitted again
	if n := len(f.be.clusters[recovers]); n != 1 {
		t.Fatalf("submitted %d times within the first wait, want 1", n)
	}
	f.now = f.now.Add(time.Minute)
	f.be.dispatchErr = nil
	f.cycle(t)
	want(t, f.env.Job(t, recovers), "Running", "", "")

	f.be.dispatchErr = resourcemanager.Retryable(errors.New("connection reset by peer"))
	_, gives := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	f.cycle(t)
	f.now = f.now.Add(resourcemanager.DefaultRetry.Dispatch.Window - time.Second)
	f.cycle(t)
	want(t, f.env.Job(t, gives), "Pending", "Dispatching", "(attempt 2), retrying in 2s")
	f.now = f.now.Add(time.Second)
	f.cycle(t)
	want(t, f.env.Job(t, gives), "Failed", "JobSubmitFailed", "failed for 5m0s (2 attempts): connection reset by peer")

	// A cluster that stays unreachable (in backoff, so nothing is asked of
	// it) still cannot hold the queue's slot past the window.
	_, stuck := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	f.cycle(t)
	want(t, f.env.Job(t, stuck), "Pending", "Dispatching", "retrying")
	f.be.setHealth(resourcemanager.Health{Err: errors.New("dial tcp: i/o timeout"), Backoff: true})
	f.now = f.now.Add(resourcemanager.DefaultRetry.Dispatch.Window)
	f.cycle(t)
	want(t, f.env.Job(t, stuck), "Failed", "JobSubmitFailed", "could not be asked to remove anything")
}

// The retry policies are the operator's (falcon controller's
// --dispatch-retry-* and --stop-retry-* flags): a dispatch and a stop that
// keep failing are tried again at the policy's pace and given up after its
// window, not the defaults'.
func TestRetryPoliciesAreConfigurable(t *testing.T) {
	f := setup(t, resourcemanager.WithRetry(resourcemanager.Retry{
		Dispatch: resourcemanager.RetryPolicy{Initial: 10 * time.Second, Max: 10 * time.Second, Window: 35 * time.Second},
		Stop:     resourcemanager.RetryPolicy{Initial: 3 * time.Second, Max: 6 * time.Second, Window: 20 * time.Second},
	}))
	f.be.dispatchErr = resourcemanager.Retryable(errors.New("Unauthorized"))
	_, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	tries := func() int {
		f.be.mu.Lock()
		defer f.be.mu.Unlock()
		return len(f.be.clusters[job])
	}
	f.cycle(t)
	want(t, f.env.Job(t, job), "Pending", "Dispatching", "(attempt 1), retrying in 10s, for up to 35s: Unauthorized")
	f.now = f.now.Add(9 * time.Second)
	f.cycle(t)
	if n := tries(); n != 1 {
		t.Fatalf("submitted %d times within the policy's first wait, want 1", n)
	}
	for _, at := range []time.Duration{time.Second, 10 * time.Second, 10 * time.Second} { // 10 s, 20 s, 30 s
		f.now = f.now.Add(at)
		f.cycle(t)
	}
	if n := tries(); n != 4 {
		t.Fatalf("submitted %d times in 30 s at a 10 s pace, want 4", n)
	}
	want(t, f.env.Job(t, job), "Pending", "Dispatching", "(attempt 4), retrying in 10s, for up to 35s")
	f.now = f.now.Add(5 * time.Second)
	f.cycle(t)
	want(t, f.env.Job(t, job), "Failed", "JobSubmitFailed", "failed for 35s (4 attempts): Unauthorized")

	f.be.dispatchErr = nil
	exp, running := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	f.cycle(t)
	want(t, f.env.Job(t, running), "Running", "", "")
	f.be.stopErr = errors.New("the server is currently unable to handle the request")
	if _, err := f.env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp, Reason: "done with it"}); err != nil {
		t.Fatal(err)
	}
	for range 7 { // 0, 3, 6, 9, 12, 15, 18 s: the stop is asked at 0, 3, 9, 15 s
		f.cycle(t)
		f.now = f.now.Add(3 * time.Second)
	}
	if n := f.be.stopCount(running); n != 4 {
		t.Fatalf("stop asked %d times in 18 s at 3 s doubling to 6 s, want 4", n)
	}
	want(t, f.env.Job(t, running), "Aborting", "", "")
	f.cycle(t) // 21 s: past the 20 s window
	want(t, f.env.Job(t, running), "Aborted", "", "done with it; cluster local never confirmed the stop (5 attempts over 20s)")
}

// A cluster that refuses to stop a job (or never answers) is asked again
// with backoff, never in a tight loop; after StopRetryWindow the outcome is
// recorded anyway, saying the stop was never confirmed, so neither an abort
// nor a failure is held for ever.
func TestStopThatKeepsFailing(t *testing.T) {
	for _, tt := range []struct {
		name            string
		act             func(t *testing.T, f *fixture, exp, job string)
		status, message string
	}{
		{"abort", func(t *testing.T, f *fixture, exp, _ string) {
			if _, err := f.env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp, Reason: "user gave up"}); err != nil {
				t.Fatal(err)
			}
		}, "Aborted", "user gave up; cluster local never confirmed the stop"},
		{"failure", func(t *testing.T, f *fixture, _, job string) {
			f.be.set(job, resourcemanager.PhaseFailed, "exit code 3")
		}, "Failed", "exit code 3; cluster local never confirmed the stop"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			exp, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
			f.cycle(t)
			want(t, f.env.Job(t, job), "Running", "", "")
			f.be.stopErr = errors.New("the server is currently unable to handle the request")
			tt.act(t, f, exp, job)
			f.cycle(t)
			if st := f.env.Job(t, job).GetStatus(); st == tt.status {
				t.Fatalf("recorded %s after the first failed stop", st)
			}
			asked := f.be.stopped[job]
			f.cycle(t) // within the backoff: the cluster is not asked again
			if f.be.stopped[job] != asked {
				t.Fatalf("stop asked %d times within its backoff, want %d", f.be.stopped[job], asked)
			}
			for i := 0; i < 20 && f.env.Job(t, job).GetStatus() != tt.status; i++ {
				f.now = f.now.Add(30 * time.Second)
				f.cycle(t)
			}
			j := f.env.Job(t, job)
			want(t, j, tt.status, j.GetReason(), tt.message)
			if f.be.stopped[job] < 3 {
				t.Fatalf("stop asked %d times over the window, want several", f.be.stopped[job])
			}
			if !strings.Contains(j.GetMessage(), "unable to handle the request") {
				t.Fatalf("message %q does not name the stop's error", j.GetMessage())
			}
			// Recorded, but not forgotten: the stop is asked again, with
			// longer gaps, until the cluster confirms it, and then never.
			asked = f.be.stopped[job]
			f.be.stopErr = nil
			f.now = f.now.Add(leftoverGap)
			f.cycle(t)
			if f.be.stopped[job] != asked+1 {
				t.Fatalf("stop asked %d times after the outcome was recorded, want %d", f.be.stopped[job], asked+1)
			}
			f.now = f.now.Add(leftoverGap)
			f.cycle(t)
			if f.be.stopped[job] != asked+1 {
				t.Fatalf("stop asked again once the cluster confirmed it: %d times, want %d", f.be.stopped[job], asked+1)
			}
		})
	}
}

// leftoverGap is longer than any wait between two tries at removing what an
// ended job left (resourcemanager's leftoverRetryMax).
const leftoverGap = 6 * time.Minute

// An abort forced through the API ends a job at once and asks nothing of its
// cluster; the manager still stops what the job started there, and asks
// again, with backoff, while the cluster refuses.
func TestForcedAbortIsStoppedOnItsCluster(t *testing.T) {
	f := setup(t)
	exp, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	f.cycle(t)
	want(t, f.env.Job(t, job), "Running", "", "")
	f.be.stopErr = errors.New("connection refused")
	if _, err := f.env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp, Reason: "cluster is gone", Force: true}); err != nil {
		t.Fatal(err)
	}
	want(t, f.env.Job(t, job), "Aborted", "", "cluster never confirmed")
	f.cycle(t)
	if f.be.stopped[job] != 1 {
		t.Fatalf("the forced abort's job was asked to stop %d times, want 1", f.be.stopped[job])
	}
	f.cycle(t) // within the backoff
	if f.be.stopped[job] != 1 {
		t.Fatalf("stop asked %d times within its backoff, want 1", f.be.stopped[job])
	}
	f.be.stopErr = nil
	f.now = f.now.Add(leftoverGap)
	f.cycle(t)
	f.now = f.now.Add(leftoverGap)
	f.cycle(t)
	if f.be.stopped[job] != 2 {
		t.Fatalf("stop asked %d times, want 2: once refused, once confirmed, then never", f.be.stopped[job])
	}
	want(t, f.env.Job(t, job), "Aborted", "", "force-aborted")
}

// A cluster no connection can be built to (its kubeconfig is gone) fails a
// job at once with the real cause: nothing was created there, and waiting
// cannot fix a registration.
func TestUnusableClusterFailsAtOnce(t *testing.T) {
	f := setup(t)
	f.be.dispatchErr = &resourcemanager.UnusableError{Err: errors.New("kubeconfig for cluster local: stat /nope: no such file or directory")}
	f.be.stopErr = f.be.dispatchErr
	_, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	f.cycle(t)
	want(t, f.env.Job(t, job), "Failed", "JobSubmitFailed", "stat /nope: no such file or directory; nothing was created there")
}

func TestTimeout(t *testing.T) {
	f := setup(t)
	_, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1, TimeoutSeconds: 30})
	f.cycle(t)
	started := f.env.Job(t, job).GetStartedAt().AsTime()

	f.now = started.Add(29 * time.Second)
	next, err := f.mgr.Reconcile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want(t, f.env.Job(t, job), "Running", "", "")
	if !next.Equal(started.Add(30 * time.Second)) {
		t.Fatalf("next wake-up %v, want the deadline %v", next, started.Add(30*time.Second))
	}
	f.now = started.Add(30 * time.Second)
	f.cycle(t)
	want(t, f.env.Job(t, job), "Failed", "Timeout", "30s")
	if f.be.stopped[job] != 1 {
		t.Fatalf("timed-out job stopped %d times, want 1", f.be.stopped[job])
	}
}

func TestAbortInEveryPhase(t *testing.T) {
	abort := func(t *testing.T, f *fixture, exp string) {
		if _, err := f.env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("waiting, never dispatched", func(t *testing.T) {
		f := setup(t)
		exp, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
		abort(t, f, exp)
		f.cycle(t)
		j := f.env.Job(t, job)
		want(t, j, "Aborted", "", "test")
		if j.GetAbortedAt() == nil || f.be.stopped[job] != 0 || f.be.dispatched[job] != nil {
			t.Fatalf("aborted_at %v, stopped %d, dispatched %v", j.GetAbortedAt(), f.be.stopped[job], f.be.dispatched[job] != nil)
		}
	})
	t.Run("running", func(t *testing.T) {
		f := setup(t)
		exp, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
		f.cycle(t)
		abort(t, f, exp)
		f.cycle(t)
		want(t, f.env.Job(t, job), "Aborted", "", "test")
		if f.be.stopped[job] != 1 {
			t.Fatalf("stopped %d times", f.be.stopped[job])
		}
	})
	t.Run("lands while dispatching", func(t *testing.T) {
		f := setup(t)
		exp, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
		// The abort lands after the manager read the job and before it
		// records Running: its write must lose, and the abort must win.
		f.be.onDispatch = func(*falconv1.Job) {
			f.be.onDispatch = nil
			done := make(chan error)
			go func() {
				_, err := f.env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp, Reason: "test"})
				done <- err
			}()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
		f.cycle(t)
		f.cycle(t)
		want(t, f.env.Job(t, job), "Aborted", "", "test")
		if f.be.stopped[job] != 1 {
			t.Fatalf("the dispatched job was stopped %d times, want 1", f.be.stopped[job])
		}
	})
}

func TestCrashMidDispatchConverges(t *testing.T) {
	f := setup(t)
	_, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	// A previous manager marked it Dispatching and died.
	if _, err := f.env.Jobs.UpdateJobStatus(context.Background(), &falconv1.UpdateJobStatusRequest{
		Id: job, ExpectedStatus: "Pending", Status: "Pending", Reason: "Dispatching", Message: "m", ClusterName: "local"}); err != nil {
		t.Fatal(err)
	}
	f.cycle(t)
	want(t, f.env.Job(t, job), "Running", "", "")
	f.cycle(t) // idempotent: nothing more happens
	if n := len(f.be.dispatched); n != 1 {
		t.Fatalf("dispatched %d jobs", n)
	}
}

func TestClusterNotActiveWaits(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	c, err := f.env.Store.GetCluster(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	c.Status = store.ClusterMaintenance
	if _, err := f.env.Store.UpsertCluster(ctx, c); err != nil {
		t.Fatal(err)
	}
	exp, err := f.env.Exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: "pinned", ClusterName: "local", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	f.cycle(t)
	want(t, f.env.Job(t, exp.GetJobs()[0].GetId()), "Pending", "Waiting", "not active")
	if len(f.be.dispatched) != 0 {
		t.Fatal("dispatched to a cluster in maintenance")
	}
}

// A handover tells the new next in line at once; those behind it learn
// their new positions at the queue's next refresh, one write for every
// step taken meanwhile, and the cycle asks to be woken for it.
func TestPositionsBehindTheNextInLineWaitForTheirRefresh(t *testing.T) {
	f := setup(t)
	f.be.startPhase = resourcemanager.PhasePending
	task := &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"}
	var jobs []string
	for range 4 {
		_, j := f.one(t, task)
		jobs = append(jobs, j)
	}
	f.cycle(t)
	want(t, f.env.Job(t, jobs[1]), "Pending", "Waiting", "next in line")
	want(t, f.env.Job(t, jobs[3]), "Pending", "Waiting", "queue position #3, 2 ahead")

	f.be.set(jobs[0], resourcemanager.PhaseRunning, "1/1 pods running")
	next, err := f.mgr.Reconcile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want(t, f.env.Job(t, jobs[1]), "Pending", "Dispatching", "")
	want(t, f.env.Job(t, jobs[2]), "Pending", "Waiting", "next in line")
	want(t, f.env.Job(t, jobs[3]), "Pending", "Waiting", "queue position #3, 2 ahead") // not yet
	if want := f.now.Add(resourcemanager.NearRefresh); next.IsZero() || next.After(want) {
		t.Fatalf("next cycle at %v, want by %v for the refresh", next, want)
	}

	f.now = f.now.Add(resourcemanager.NearRefresh / 2)
	f.cycle(t)
	want(t, f.env.Job(t, jobs[3]), "Pending", "Waiting", "queue position #3, 2 ahead") // still not
	f.now = f.now.Add(resourcemanager.NearRefresh / 2)
	f.cycle(t)
	want(t, f.env.Job(t, jobs[3]), "Pending", "Waiting", "queue position #2, 1 ahead")
}

func TestOneJobAcquiresPerQueue(t *testing.T) {
	f := setup(t)
	f.be.startPhase = resourcemanager.PhasePending
	task := func() *falconv1.TaskSpec {
		return &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"}
	}
	_, j1 := f.one(t, task())
	_, j2 := f.one(t, task())
	_, j3 := f.one(t, task())
	_, other := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 2, DeviceType: "v7x", DeviceTopo: "2x2x2"})
	f.cycle(t)
	want(t, f.env.Job(t, j1), "Pending", "Dispatching", "")
	want(t, f.env.Job(t, j2), "Pending", "Waiting", "next in line")
	want(t, f.env.Job(t, j3), "Pending", "Waiting", "queue position #2, 1 ahead")
	// Another topology is another queue: it is not blocked.
	want(t, f.env.Job(t, other), "Pending", "Dispatching", "")

	f.be.set(j1, resourcemanager.PhaseRunning, "1/1 pods running")
	f.cycle(t)
	want(t, f.env.Job(t, j1), "Running", "", "1/1 pods running")
	want(t, f.env.Job(t, j2), "Pending", "Dispatching", "")
	want(t, f.env.Job(t, j3), "Pending", "Waiting", "next in line")

	// A job that fails while acquiring frees the slot too.
	f.be.set(j2, resourcemanager.PhaseFailed, "pod x: ImagePullBackOff")
	f.cycle(t)
	want(t, f.env.Job(t, j2), "Failed", "JobFailed", "ImagePullBackOff")
	if f.be.stopped[j2] != 1 {
		t.Fatalf("failed job's leftovers stopped %d times, want 1", f.be.stopped[j2])
	}
	want(t, f.env.Job(t, j3), "Pending", "Dispatching", "")
}

// CPU-only jobs acquire nothing: each hands its queue's slot on once its
// cluster has it, so a burst of them is submitted at once rather than one
// pod start after another; each is still watched until its pods run, and
// the order of submission is the queue's.
func TestCPUJobsHoldNoSlot(t *testing.T) {
	f := setup(t)
	f.be.startPhase = resourcemanager.PhasePending
	var jobs []string
	for range 3 {
		_, j := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
		jobs = append(jobs, j)
	}
	f.cycle(t)
	for _, j := range jobs {
		want(t, f.env.Job(t, j), "Pending", "Dispatching", "submitting to cluster local")
	}
	if len(f.be.dispatched) != 3 {
		t.Fatalf("%d of 3 CPU-only jobs submitted in one cycle", len(f.be.dispatched))
	}
	f.be.set(jobs[1], resourcemanager.PhaseRunning, "1/1 pods running")
	f.cycle(t)
	want(t, f.env.Job(t, jobs[1]), "Running", "", "1/1 pods running")
	want(t, f.env.Job(t, jobs[0]), "Pending", "Dispatching", "")
	f.be.set(jobs[2], resourcemanager.PhaseFailed, "pod x: ImagePullBackOff")
	f.cycle(t)
	want(t, f.env.Job(t, jobs[2]), "Failed", "JobFailed", "ImagePullBackOff")
}

func TestTimeoutWhileAcquiring(t *testing.T) {
	f := setup(t)
	f.be.startPhase = resourcemanager.PhasePending
	_, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1, TimeoutSeconds: 60})
	f.cycle(t)
	want(t, f.env.Job(t, job), "Pending", "Dispatching", "")
	// The deadline runs from dispatched_at, which the API server stamps
	// with its own clock.
	f.now = f.env.Job(t, job).GetDispatchedAt().AsTime().Add(59 * time.Second)
	f.cycle(t)
	want(t, f.env.Job(t, job), "Pending", "Dispatching", "")
	f.now = f.now.Add(time.Second)
	f.cycle(t)
	want(t, f.env.Job(t, job), "Failed", "Timeout", "waiting for resources")
	if f.be.stopped[job] != 1 {
		t.Fatalf("stopped %d times", f.be.stopped[job])
	}
}

// byHeader names the caller from an x-user header: experiments created
// through it belong to different users, so fairness is tested end to end
// through the real API server.
type byHeader struct{}

func (byHeader) Authenticate(_ context.Context, md map[string][]string) (auth.Principal, error) {
	u := "anonymous"
	if v := md["x-user"]; len(v) > 0 {
		u = v[0]
	}
	return auth.Principal{UserID: "test:" + u, Email: u + "@example.com", Kind: auth.KindUser}, nil
}

func TestFairOrderAcrossUsers(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "test"}, apiserver.WithAuthenticator(byHeader{}))
	be := newScripted()
	be.startPhase = resourcemanager.PhasePending
	now := time.Now()
	mgr := resourcemanager.New(env.Conn, resourcemanager.WithBackend("test", be), resourcemanager.WithClock(func() time.Time { return now }))
	create := func(user, name string) string {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user", user)
		exp, err := env.Exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
			Name: name, RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return exp.GetJobs()[0].GetId()
	}
	// alice queues three jobs before bob and carol queue one each.
	ids := map[string]string{}
	for _, n := range []string{"alice-1", "alice-2", "alice-3", "bob-1", "carol-1"} {
		ids[create(strings.Split(n, "-")[0], n)] = n
	}
	var order []string
	for range 5 {
		if _, err := mgr.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		var acquiring []string
		for id, n := range ids {
			if j := env.Job(t, id); j.GetStatus() == "Pending" && j.GetReason() == "Dispatching" {
				acquiring = append(acquiring, n)
				be.set(id, resourcemanager.PhaseRunning, "1/1 pods running")
			}
		}
		if len(acquiring) != 1 {
			t.Fatalf("%d jobs acquiring at once in one queue: %v", len(acquiring), acquiring)
		}
		order = append(order, acquiring[0])
		if _, err := mgr.Reconcile(context.Background()); err != nil { // records Running, frees the slot
			t.Fatal(err)
		}
	}
	// The design's rule: each user's earliest job is a candidate, the user
	// served last steps aside, the earliest remaining candidate wins. So
	// after bob, alice's second job (older than carol's) goes before carol,
	// and then carol goes before alice's third.
	want := []string{"alice-1", "bob-1", "alice-2", "carol-1", "alice-3"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Fatalf("dispatch order (-want +got):\n%s", diff)
	}
}

// A controller restarted while a job acquires resources keeps its deadline:
// the job row says when acquiring began.
func TestAcquireTimeoutSurvivesRestart(t *testing.T) {
	f := setup(t)
	f.be.startPhase = resourcemanager.PhasePending
	_, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1, TimeoutSeconds: 60})
	f.cycle(t)
	if f.env.Job(t, job).GetDispatchedAt() == nil {
		t.Fatal("a dispatching job has no dispatched_at")
	}
	f.now = f.now.Add(61 * time.Second)
	restarted := resourcemanager.New(f.env.Conn, resourcemanager.WithBackend("test", f.be),
		resourcemanager.WithClock(func() time.Time { return f.now }))
	if _, err := restarted.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	want(t, f.env.Job(t, job), "Failed", "Timeout", "waiting for resources")
}

func TestMetricsAndReadiness(t *testing.T) {
	reg := prometheus.NewRegistry()
	rm := metrics.NewRM(reg)
	f := &fixture{env: apitest.Start(t, map[string]string{"local": "test"}), be: newScripted(), now: time.Now()}
	f.mgr = resourcemanager.New(f.env.Conn, resourcemanager.WithBackend("test", f.be),
		resourcemanager.WithClock(func() time.Time { return f.now }), resourcemanager.WithMetrics(rm))
	if err := f.mgr.Ready(time.Minute); err == nil {
		t.Error("ready before any cycle")
	}
	_, ok := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	_, failing := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	f.cycle(t)
	if err := f.mgr.Ready(time.Minute); err != nil {
		t.Errorf("not ready after a cycle: %v", err)
	}
	f.be.set(ok, resourcemanager.PhaseSucceeded, "")
	f.be.set(failing, resourcemanager.PhaseFailed, "exit code 3")
	f.cycle(t)
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"cycles", testutil.ToFloat64(rm.Cycles), 2},
		{"running", testutil.ToFloat64(rm.Dispatched.WithLabelValues("local")), 2},
		{"succeeded", testutil.ToFloat64(rm.Finished.WithLabelValues("local", "Succeeded", "")), 1},
		{"failed", testutil.ToFloat64(rm.Finished.WithLabelValues("local", "Failed", "JobFailed")), 1},
		{"dispatch latency samples", float64(testutil.CollectAndCount(rm.DispatchLatency)), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// A cycle that cannot read the API server counts as an error, and a
	// manager whose last good cycle is too old is not ready.
	cut, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.mgr.Reconcile(cut); err == nil {
		t.Fatal("a cycle succeeded without reaching the API server")
	}
	if testutil.ToFloat64(rm.CycleErrors) != 1 {
		t.Errorf("cycle errors = %v, want 1", testutil.ToFloat64(rm.CycleErrors))
	}
	if err := f.mgr.Ready(0); err == nil {
		t.Error("still ready long after the last successful cycle")
	}
}

// sweeping is a scripted backend that says what its cluster holds, as the
// Kubernetes backend does from its informer cache.
type sweeping struct {
	*scripted
	residents []resourcemanager.Resident
}

func (s *sweeping) Residents(*falconv1.Cluster) ([]resourcemanager.Resident, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.residents), nil
}

// Stop removes the job's objects, as a Kubernetes cluster does.
func (s *sweeping) Stop(ctx context.Context, c *falconv1.Cluster, j *falconv1.Job) error {
	if err := s.scripted.Stop(ctx, c, j); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.residents = slices.DeleteFunc(s.residents, func(r resourcemanager.Resident) bool { return r.JobID == j.GetId() })
	return nil
}

// A controller that restarts forgets the leftovers it was stopping; the
// first resync's sweep finds them on a cluster whose backend says what it
// holds. Without shared pools only what still runs goes: a finished Job is
// kept for its user, and a success is never cut short.
func TestSweepAfterARestartStopsWhatStillRuns(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "test"})
	be := &sweeping{scripted: newScripted()}
	start := func() *resourcemanager.Manager {
		return resourcemanager.New(env.Conn, resourcemanager.WithBackend("test", be))
	}
	cycle := func(m *resourcemanager.Manager) {
		t.Helper()
		if _, err := m.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var exps, jobs []string
	for _, name := range []string{"forced", "failed", "succeeded"} {
		exp := env.Create(t, name, map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
		exps, jobs = append(exps, exp.GetId()), append(jobs, exp.GetJobs()[0].GetId())
	}
	first := start()
	cycle(first)
	for _, j := range jobs {
		want(t, env.Job(t, j), "Running", "", "")
	}
	be.set(jobs[1], resourcemanager.PhaseFailed, "exit code 3")
	be.set(jobs[2], resourcemanager.PhaseSucceeded, "1/1 pods succeeded")
	cycle(first)
	// The first controller dies; the abort is forced while none runs.
	if _, err := env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exps[0], Force: true}); err != nil {
		t.Fatal(err)
	}
	be.mu.Lock()
	be.residents = []resourcemanager.Resident{
		{JobID: jobs[0], Active: true},
		{JobID: jobs[1], Active: false},
		{JobID: jobs[2], Active: true}, // its Job not yet marked Complete
	}
	be.mu.Unlock()
	before := []int{be.stopped[jobs[0]], be.stopped[jobs[1]], be.stopped[jobs[2]]}
	second := start()
	cycle(second)
	cycle(second)
	got := []int{be.stopped[jobs[0]] - before[0], be.stopped[jobs[1]] - before[1], be.stopped[jobs[2]] - before[2]}
	if !slices.Equal(got, []int{1, 0, 0}) {
		t.Fatalf("after the restart, stopped forced/failed/succeeded %v times, want [1 0 0]", got)
	}
}
