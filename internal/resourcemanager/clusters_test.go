package resourcemanager_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/metrics"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// setStatus puts a registered cluster in status, as `falcon cluster
// maintenance` or a cluster file would.
func setStatus(t *testing.T, env *apitest.Env, name, status string) {
	t.Helper()
	ctx := context.Background()
	c, err := env.Store.GetCluster(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c.Status = status
	if _, err := env.Store.UpsertCluster(ctx, c); err != nil {
		t.Fatal(err)
	}
}

func register(t *testing.T, env *apitest.Env, name string) {
	t.Helper()
	if _, err := env.Store.UpsertCluster(context.Background(), &store.Cluster{
		ID: ids.New(ids.Cluster), Name: name, Backend: "test", Status: store.ClusterActive, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
}

func pinnedTo(t *testing.T, env *apitest.Env, cluster, name string, task *falconv1.TaskSpec) string {
	t.Helper()
	exp, err := env.Exps.CreateExp(context.Background(), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: name, ClusterName: cluster, RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": task}}})
	if err != nil {
		t.Fatal(err)
	}
	return exp.GetJobs()[0].GetId()
}

func wantCluster(t *testing.T, j *falconv1.Job, cluster string) {
	t.Helper()
	if j.GetClusterName() != cluster {
		t.Fatalf("job %s is on cluster %q, want %q", j.GetId(), j.GetClusterName(), cluster)
	}
}

// A cluster that leaves service after jobs queued on it: the unpinned
// waiting job goes to another cluster, the job acquiring there is watched to
// the end, and a job pinned there waits for it, saying why, and runs there
// once it is back.
func TestWaitingJobsLeaveClusterOutOfService(t *testing.T) {
	tests := []struct {
		name   string
		status string // "" deletes the cluster from the registry
		why    string
	}{
		{"maintenance", store.ClusterMaintenance, "it is in maintenance"},
		{"offline", store.ClusterOffline, "it is offline"},
		{"deleted", "", "it is no longer registered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := &fixture{env: apitest.Start(t, map[string]string{"a": "test"}), be: newScripted(), now: time.Now()}
			f.mgr = resourcemanager.New(f.env.Conn, resourcemanager.WithBackend("test", f.be),
				resourcemanager.WithClock(func() time.Time { return f.now }))
			f.be.startPhase = resourcemanager.PhasePending
			// A slice: CPU-only jobs hold no slot (TestCPUJobsHoldNoSlot).
			task := func() *falconv1.TaskSpec {
				return &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"}
			}
			_, held := f.one(t, task())
			_, moving := f.one(t, task())
			// The registry refuses to delete a cluster a live job names, so
			// a pinned job exists only while the cluster does.
			pinned := ""
			if tt.status != "" {
				pinned = pinnedTo(t, f.env, "a", "pinned", task())
			}
			f.cycle(t)
			want(t, f.env.Job(t, held), "Pending", "Dispatching", "")
			want(t, f.env.Job(t, moving), "Pending", "Waiting", "next in line")

			register(t, f.env, "b")
			if tt.status == "" {
				if _, err := f.env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{
					Id: held, ExpectedStatus: "Pending", Status: "Failed", Reason: "JobFailed", Message: "gone"}); err != nil {
					t.Fatal(err)
				}
				if err := f.env.Store.DeleteCluster(ctx, "a"); err != nil {
					t.Fatal(err)
				}
			} else {
				setStatus(t, f.env, "a", tt.status)
			}
			f.cycle(t)
			j := f.env.Job(t, moving)
			want(t, j, "Pending", "Dispatching", "")
			wantCluster(t, j, "b")
			if tt.status == "" {
				return
			}

			// What a cluster out of service already started, it finishes.
			j = f.env.Job(t, held)
			want(t, j, "Pending", "Dispatching", "")
			wantCluster(t, j, "a")
			f.be.set(held, resourcemanager.PhaseRunning, "1/1 running")
			f.cycle(t)
			want(t, f.env.Job(t, held), "Running", "", "")

			// Its queue's slot is free now, yet the pinned job waits.
			msg := "pinned cluster a is not active: " + tt.why
			want(t, f.env.Job(t, pinned), "Pending", "Waiting", msg)
			if f.be.dispatched[pinned] != nil {
				t.Fatal("a job was dispatched to a cluster out of service")
			}
			// A restarted controller reaches the same state.
			f.mgr = resourcemanager.New(f.env.Conn, resourcemanager.WithBackend("test", f.be),
				resourcemanager.WithClock(func() time.Time { return f.now }))
			f.cycle(t)
			want(t, f.env.Job(t, pinned), "Pending", "Waiting", msg)
			if n := len(f.be.dispatched); n != 2 {
				t.Fatalf("%d jobs dispatched after a restart, want 2 (held and moving)", n)
			}

			setStatus(t, f.env, "a", store.ClusterActive)
			f.cycle(t)
			j = f.env.Job(t, pinned)
			want(t, j, "Pending", "Dispatching", "")
			wantCluster(t, j, "a")
		})
	}
}

// A job acquiring on a cluster deleted from the registry under it (a
// deletion racing the pick) fails rather than waiting forever; a job pinned
// to it says it waits for it.
func TestVanishedCluster(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	_, acquiring := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	_, pinned := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	for id, reason := range map[string]string{acquiring: "Dispatching", pinned: "Waiting"} {
		if _, err := f.env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{
			Id: id, ExpectedStatus: "Pending", Status: "Pending", Reason: reason, Message: "m", ClusterName: "gone"}); err != nil {
			t.Fatal(err)
		}
	}
	f.cycle(t)
	want(t, f.env.Job(t, acquiring), "Failed", "JobSubmitFailed", "cluster gone is no longer registered")
	want(t, f.env.Job(t, pinned), "Pending", "Waiting", "pinned cluster gone is not active: it is no longer registered")
	if len(f.be.dispatched) != 0 {
		t.Fatalf("dispatched %d jobs to another cluster", len(f.be.dispatched))
	}
}

// Each GPU type and size, and CPU-only jobs, queue apart: none waits behind
// another's acquiring job (and a CPU-only job, acquiring nothing, holds its
// queue's slot only until its cluster has it).
func TestQueuePerAcceleratorShape(t *testing.T) {
	reg := prometheus.NewRegistry()
	rm := metrics.NewRM(reg)
	f := &fixture{env: apitest.Start(t, map[string]string{"local": "test"}), be: newScripted(), now: time.Now()}
	f.mgr = resourcemanager.New(f.env.Conn, resourcemanager.WithBackend("test", f.be),
		resourcemanager.WithClock(func() time.Time { return f.now }), resourcemanager.WithMetrics(rm))
	f.be.startPhase = resourcemanager.PhasePending
	_, h100 := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "h100"})
	_, h100b := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "nvidia-h100-80gb", DeviceCount: 8})
	_, h100x4 := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "h100", DeviceCount: 4})
	_, l4 := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 2, DeviceType: "l4"})
	_, cpu := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	_, tpu := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"})
	f.cycle(t)
	for _, id := range []string{h100, h100x4, l4, cpu, tpu} {
		want(t, f.env.Job(t, id), "Pending", "Dispatching", "")
	}
	// The same type and size is the same queue, however it is spelled.
	want(t, f.env.Job(t, h100b), "Pending", "Waiting", "next in line")

	st, err := falconv1.NewClusterServiceClient(f.env.UserConn).GetClusterStatus(context.Background(), &falconv1.GetClusterStatusRequest{Name: "local"})
	if err != nil {
		t.Fatal(err)
	}
	wantQueues := []*falconv1.QueueStatus{
		{Topology: "cpu"},
		{Topology: "nvidia-h100-80gb:4", AcceleratorTypes: []string{"nvidia-h100-80gb"}, AcquiringJobId: h100x4},
		{Topology: "nvidia-h100-80gb:8", AcceleratorTypes: []string{"nvidia-h100-80gb"}, Waiting: 1, AcquiringJobId: h100},
		{Topology: "nvidia-l4:8", AcceleratorTypes: []string{"nvidia-l4"}, AcquiringJobId: l4},
		{Topology: "v7x:2x2x1", AcceleratorTypes: []string{"v7x"}, AcquiringJobId: tpu},
	}
	if diff := cmp.Diff(wantQueues, st.GetQueues(), protocmp.Transform()); diff != "" {
		t.Errorf("reported queues (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(rm.QueueWaiting.WithLabelValues("local", "nvidia-h100-80gb:8")); got != 1 {
		t.Errorf("waiting jobs in local/nvidia-h100-80gb:8 = %v, want 1", got)
	}
}

// While a cluster's backend backs off, the cycle makes no call to it: the
// running job is not observed, the acquiring job is not submitted again and
// the waiting job is not picked; each job, the cluster's status and the
// metrics say why. Once it answers, work resumes.
func TestUnreachableClusterGetsNoCalls(t *testing.T) {
	reg := prometheus.NewRegistry()
	rm := metrics.NewRM(reg)
	f := &fixture{env: apitest.Start(t, map[string]string{"local": "test"}), be: newScripted(), now: time.Now()}
	f.mgr = resourcemanager.New(f.env.Conn, resourcemanager.WithBackend("test", f.be),
		resourcemanager.WithClock(func() time.Time { return f.now }), resourcemanager.WithMetrics(rm))
	task := func() *falconv1.TaskSpec { return &falconv1.TaskSpec{Command: "x", Replica: 1, TimeoutSeconds: 60} }
	_, running := f.one(t, task())
	f.cycle(t)
	want(t, f.env.Job(t, running), "Running", "", "")
	f.be.startPhase = resourcemanager.PhasePending
	_, acquiring := f.one(t, task())
	f.cycle(t)
	want(t, f.env.Job(t, acquiring), "Pending", "Dispatching", "")
	_, waiting := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})

	f.be.setHealth(resourcemanager.Health{Err: errors.New("dial tcp 10.0.0.1:443: i/o timeout"), Backoff: true})
	f.now = f.now.Add(2 * time.Minute) // past every deadline and the report interval
	calls := f.be.callCount()
	f.cycle(t)
	if n := f.be.callCount() - calls; n != 0 {
		t.Fatalf("%d calls to a cluster in backoff", n)
	}
	want(t, f.env.Job(t, running), "Running", "", "")
	want(t, f.env.Job(t, acquiring), "Pending", "Dispatching", "cluster local is unreachable, retrying: dial tcp 10.0.0.1:443: i/o timeout")
	want(t, f.env.Job(t, waiting), "Pending", "Waiting", "next in line")
	want(t, f.env.Job(t, waiting), "Pending", "Waiting", "cluster local is unreachable: dial tcp")
	st, err := falconv1.NewClusterServiceClient(f.env.UserConn).GetClusterStatus(context.Background(), &falconv1.GetClusterStatusRequest{Name: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.GetError(), "i/o timeout") {
		t.Errorf("cluster status error %q, want the connection error", st.GetError())
	}
	if got := testutil.ToFloat64(rm.ClusterUnreachable.WithLabelValues("local")); got != 1 {
		t.Errorf("unreachable gauge = %v, want 1", got)
	}

	// It answers again: the deadlines that passed meanwhile are enforced.
	f.be.setHealth(resourcemanager.Health{})
	f.cycle(t)
	want(t, f.env.Job(t, running), "Failed", "Timeout", "")
	want(t, f.env.Job(t, acquiring), "Failed", "Timeout", "waiting for resources")
	want(t, f.env.Job(t, waiting), "Pending", "Dispatching", "")
	if got := testutil.ToFloat64(rm.ClusterUnreachable.WithLabelValues("local")); got != 0 {
		t.Errorf("unreachable gauge = %v after recovery, want 0", got)
	}
}

// Aborting a job that never reached its cluster needs nothing from it, so
// it completes while the cluster is unreachable; a dispatched job's abort
// waits to stop it there.
func TestAbortOfAJobQueuedForAnUnreachableCluster(t *testing.T) {
	f := &fixture{env: apitest.Start(t, map[string]string{"local": "test"}), be: newScripted(), now: time.Now()}
	f.mgr = resourcemanager.New(f.env.Conn, resourcemanager.WithBackend("test", f.be),
		resourcemanager.WithClock(func() time.Time { return f.now }))
	f.be.startPhase = resourcemanager.PhasePending
	slice := func() *falconv1.TaskSpec {
		return &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"}
	}
	dispatched := pinnedTo(t, f.env, "local", "dispatched", slice())
	f.cycle(t)
	want(t, f.env.Job(t, dispatched), "Pending", "Dispatching", "")
	queued := pinnedTo(t, f.env, "local", "queued", slice())
	f.cycle(t)
	want(t, f.env.Job(t, queued), "Pending", "Waiting", "")

	f.be.setHealth(resourcemanager.Health{Err: errors.New("connection refused"), Backoff: true})
	for _, id := range []string{dispatched, queued} {
		if _, err := f.env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: f.env.Job(t, id).GetExpId()}); err != nil {
			t.Fatal(err)
		}
	}
	f.cycle(t)
	want(t, f.env.Job(t, queued), "Aborted", "", "")
	want(t, f.env.Job(t, dispatched), "Aborting", "", "")
	if f.be.stopped[queued] != 0 {
		t.Errorf("the queued job was stopped on its cluster %d times; it never reached it", f.be.stopped[queued])
	}

	f.be.setHealth(resourcemanager.Health{})
	f.cycle(t)
	want(t, f.env.Job(t, dispatched), "Aborted", "", "")
	if f.be.stopped[dispatched] != 1 {
		t.Errorf("the dispatched job was stopped %d times, want once", f.be.stopped[dispatched])
	}
}
