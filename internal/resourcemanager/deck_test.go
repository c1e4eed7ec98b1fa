package resourcemanager_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/metrics"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// gatedConn holds the manager's status writes while closed, as a database
// that does not answer would: what the manager does meanwhile does not
// wait for a write.
type gatedConn struct {
	grpc.ClientConnInterface
	mu      sync.Mutex
	open    chan struct{} // closed while writes pass
	blocked atomic.Int32  // writes waiting at the gate
	gets    atomic.Int32  // GetJob calls: a submission reading its config
	// batchesOnly: the gate holds the cycle's batched writes
	// (UpdateJobStatuses) and lets single ones pass.
	batchesOnly bool
	// singlesOnly: the gate holds the single writes and lets batches pass.
	singlesOnly bool
	// refused counts single status writes the store refused (the row
	// changed under the writer).
	refused atomic.Int32
}

var closedGate = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func newGatedConn(conn grpc.ClientConnInterface) *gatedConn {
	g := &gatedConn{ClientConnInterface: conn, open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gatedConn) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
	g.batchesOnly, g.singlesOnly = false, false
}

// holdSingles holds the single status writes only (a job's end recorded
// between cycles) and lets the cycle's batched writes pass.
func (g *gatedConn) holdSingles() {
	g.hold()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.singlesOnly = true
}

// holdBatches holds the batched writes only.
func (g *gatedConn) holdBatches() {
	g.hold()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.batchesOnly = true
}

func (g *gatedConn) pass() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gatedConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if strings.HasSuffix(method, "/GetJob") {
		g.gets.Add(1)
	}
	if strings.HasSuffix(method, "/UpdateJobStatuses") || strings.HasSuffix(method, "/UpdateJobStatus") {
		g.mu.Lock()
		open := g.open
		single := strings.HasSuffix(method, "/UpdateJobStatus")
		if g.batchesOnly && single || g.singlesOnly && !single {
			open = closedGate
		}
		g.mu.Unlock()
		g.blocked.Add(1)
		defer g.blocked.Add(-1)
		select {
		case <-open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := g.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
	if strings.HasSuffix(method, "/UpdateJobStatus") && status.Code(err) == codes.FailedPrecondition {
		g.refused.Add(1)
	}
	return err
}

// deckRun is a manager under Run over a backend whose pods start Pending,
// so that a job holds its queue's slot until the test says its pods run.
type deckRun struct {
	env   *apitest.Env
	be    *scripted
	gate  *gatedConn
	reg   *prometheus.Registry
	stop  func() // cancels Run and waits for it
	touch func(ids ...string)
}

func startDeck(t *testing.T, env *apitest.Env, be *scripted) *deckRun {
	return startDeckOn(t, env, be, be)
}

// startDeckOn is startDeck with backend (be, or one built on it) serving
// the clusters, and opts.
func startDeckOn(t *testing.T, env *apitest.Env, be *scripted, backend resourcemanager.Backend, opts ...resourcemanager.Option) *deckRun {
	d := &deckRun{env: env, be: be, gate: newGatedConn(env.Conn), reg: prometheus.NewRegistry()}
	mgr := resourcemanager.New(d.gate, append([]resourcemanager.Option{resourcemanager.WithBackend("test", backend),
		resourcemanager.WithMetrics(metrics.NewRM(d.reg)),
		resourcemanager.WithInterval(time.Hour), resourcemanager.WithResync(time.Hour)}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	var once sync.Once
	d.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(func() { d.gate.pass(); d.stop() })
	d.touch = mgr.Touch
	return d
}

func (d *deckRun) dispatched(id string) bool {
	d.be.mu.Lock()
	defer d.be.mu.Unlock()
	_, ok := d.be.dispatched[id]
	return ok
}

func (d *deckRun) waitJob(t *testing.T, id, status, reason, msgPart string) *falconv1.Job {
	t.Helper()
	var j *falconv1.Job
	waitFor(t, "job "+id+" "+status+"/"+reason, func() bool {
		j = d.env.Job(t, id)
		return j.GetStatus() == status && j.GetReason() == reason && strings.Contains(j.GetMessage(), msgPart)
	})
	return j
}

// The next job of a queue is picked ahead and recorded Next with its
// cluster; when the holder's pods run, it is submitted at once, though the
// cycle in flight is stuck on a write: the handover waits for no write and
// no cycle. The cycle then records the holder's Running and the pick, and
// picks the job after ahead in turn.
func TestTheDeckHandsTheSlotOverBeforeAnyCycle(t *testing.T) {
	be := newScripted()
	be.startPhase = resourcemanager.PhasePending
	d := startDeck(t, apitest.Start(t, map[string]string{"local": "test"}), be)
	var ids []string
	for _, name := range []string{"holder", "next", "third"} {
		// The next one has no config: nothing in its row says whether
		// it was read.
		exp, err := d.env.Exps.CreateExp(context.Background(), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
			Name: name, RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": slotTask}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, exp.GetJobs()[0].GetId())
	}
	other := d.env.Create(t, "other-queue", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1, DeviceType: "v6e", DeviceTopo: "2x2"}}).GetJobs()[0].GetId()
	d.waitJob(t, ids[0], "Pending", "Dispatching", "")
	d.waitJob(t, other, "Pending", "Dispatching", "")
	next := d.waitJob(t, ids[1], "Pending", "Next", "next in line on cluster local")
	if next.GetClusterName() != "local" {
		t.Fatalf("the job picked ahead names cluster %q, want local", next.GetClusterName())
	}
	if next.GetDispatchedAt() != nil {
		t.Error("the job picked ahead has dispatched_at set: it does not hold the slot")
	}
	d.waitJob(t, ids[2], "Pending", "Waiting", "queue position #2, 1 ahead")
	d.armed(t, 1)
	if d.dispatched(ids[1]) {
		t.Fatal("the job on deck was submitted while the holder's pods are not running")
	}

	// A cycle in flight, stuck on its write: the other queue's holder runs.
	gets := d.gate.gets.Load()
	d.gate.hold()
	be.set(other, resourcemanager.PhaseRunning, "1/1 pods running")
	d.touch(other)
	waitFor(t, "a cycle stuck on its write", func() bool { return d.gate.blocked.Load() > 0 })
	// The submission's Kubernetes Job is "created" only once Dispatch
	// returns: hold it there (with the backend's lock: nothing else asks
	// the backend meanwhile).
	sending, created := make(chan struct{}), make(chan struct{})
	be.mu.Lock()
	be.onDispatch = func(j *falconv1.Job) {
		if j.GetId() == ids[1] {
			close(sending)
			<-created
		}
	}
	be.mu.Unlock()
	be.set(ids[0], resourcemanager.PhaseRunning, "1/1 pods running")
	d.touch(ids[0])
	select {
	case <-sending:
	case <-time.After(30 * time.Second):
		t.Fatal("the job on deck was not submitted")
	}
	if got := metric(t, d.reg, "falcon_rm_handovers_ahead_total"); got != 1 {
		t.Errorf("falcon_rm_handovers_ahead_total = %v, want 1", got)
	}
	// The handover is timed from the report: sent before the backend
	// call, created after it returned.
	if n, _ := histogram(t, d.reg, "falcon_rm_handover_seconds", "until", "sent"); n != 1 {
		t.Errorf("handovers timed until sent: %d, want 1", n)
	}
	if n, _ := histogram(t, d.reg, "falcon_rm_handover_seconds", "until", "created"); n != 0 {
		t.Errorf("handovers timed until created while the create has not returned: %d, want 0", n)
	}
	close(created)
	if !d.dispatched(ids[1]) {
		t.Fatal("the job on deck was not recorded submitted")
	}
	waitFor(t, "the handover timed until created", func() bool {
		n, _ := histogram(t, d.reg, "falcon_rm_handover_seconds", "until", "created")
		return n == 1
	})
	_, sent := histogram(t, d.reg, "falcon_rm_handover_seconds", "until", "sent")
	_, done := histogram(t, d.reg, "falcon_rm_handover_seconds", "until", "created")
	if sent < 0 || done < sent {
		t.Errorf("handover timed %v s until sent and %v s until created: want 0 <= sent <= created", sent, done)
	}
	// The write that recorded it Next brought its (empty) config back.
	if n := d.gate.gets.Load() - gets; n != 0 {
		t.Errorf("the handover read %d jobs, want none", n)
	}

	d.gate.pass()
	d.waitJob(t, ids[0], "Running", "", "1/1 pods running")
	d.waitJob(t, ids[1], "Pending", "Dispatching", "")
	d.waitJob(t, ids[2], "Pending", "Next", "next in line")
	be.mu.Lock()
	defer be.mu.Unlock()
	if _, ok := be.dispatched[ids[2]]; ok {
		t.Error("the third job was submitted while the second holds the slot")
	}
	if n := len(be.clusters[ids[1]]); n != 1 {
		t.Errorf("the job handed over was submitted %d times, want once (the cycle found the deck's submission)", n)
	}
}

// metric reads one of the manager's unlabelled counters or gauges.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not registered", name)
	return 0
}

// armed waits until the deck holds n handovers: the write that recorded
// a job Next is visible before the cycle that made it has armed the deck.
func (d *deckRun) armed(t *testing.T, n float64) {
	t.Helper()
	waitFor(t, "the deck armed", func() bool { return metric(t, d.reg, "falcon_rm_handovers_waiting") == n })
}

// An abort of the job on deck takes it off the deck: the holder's pods
// running afterwards submit nothing, and, nothing having been submitted,
// its cluster is not asked to stop it. An abort that comes after the deck
// submitted it (the cycle's writes held meanwhile) stops what the deck
// created.
func TestAbortsOnDeck(t *testing.T) {
	for _, submitted := range []bool{false, true} {
		t.Run(map[bool]string{false: "before the handover", true: "after the deck submitted it"}[submitted], func(t *testing.T) {
			be := newScripted()
			be.startPhase = resourcemanager.PhasePending
			d := startDeck(t, apitest.Start(t, map[string]string{"local": "test"}), be)
			holder := d.env.Create(t, "holder", map[string]*falconv1.TaskSpec{"main": slotTask}).GetJobs()[0].GetId()
			exp := d.env.Create(t, "next", map[string]*falconv1.TaskSpec{"main": slotTask})
			next := exp.GetJobs()[0].GetId()
			d.waitJob(t, next, "Pending", "Next", "")
			d.armed(t, 1)
			if submitted {
				d.gate.hold()
				be.set(holder, resourcemanager.PhaseRunning, "1/1 pods running")
				d.touch(holder)
				waitFor(t, "the job on deck submitted", func() bool { return d.dispatched(next) })
			}
			if _, err := d.env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp.GetId(), Reason: "test"}); err != nil {
				t.Fatal(err)
			}
			if !submitted {
				d.armed(t, 0)
				be.set(holder, resourcemanager.PhaseRunning, "1/1 pods running")
				d.touch(holder)
			}
			d.gate.pass()
			d.waitJob(t, next, "Aborted", "", "")
			d.waitJob(t, holder, "Running", "", "")
			be.mu.Lock()
			defer be.mu.Unlock()
			if _, ok := be.dispatched[next]; ok != submitted {
				t.Errorf("the aborted job on deck submitted: %v, want %v", ok, submitted)
			}
			if stops := be.stopped[next]; (stops > 0) != submitted {
				t.Errorf("the aborted job on deck was stopped %d times; want a stop only if it was submitted (%v)", stops, submitted)
			}
		})
	}
}

// A controller that dies between the deck's create and the write that
// records it leaves the job Next on its cluster: the next controller seats
// it on deck there again and submits it there (finding what the first
// one created), never on another cluster, though another offers the type
// with an empty queue.
func TestARestartKeepsTheJobOnDeckOnItsCluster(t *testing.T) {
	ctx := context.Background()
	env := apitest.Start(t, map[string]string{"a": "test", "b": "test"})
	setStatus := func(name, status string) {
		t.Helper()
		if _, err := falconv1.NewClusterServiceClient(env.UserConn).SetClusterStatus(ctx, &falconv1.SetClusterStatusRequest{Name: name, Status: status}); err != nil {
			t.Fatal(err)
		}
	}
	be := newScripted()
	be.startPhase = resourcemanager.PhasePending
	// b takes nothing while the two jobs are placed: both queue on a.
	setStatus("b", "maintenance")
	d1 := startDeck(t, env, be)
	holder := env.Create(t, "holder", map[string]*falconv1.TaskSpec{"main": slotTask}).GetJobs()[0].GetId()
	next := env.Create(t, "next", map[string]*falconv1.TaskSpec{"main": slotTask}).GetJobs()[0].GetId()
	d1.waitJob(t, holder, "Pending", "Dispatching", "")
	if j := d1.waitJob(t, next, "Pending", "Next", ""); j.GetClusterName() != "a" {
		t.Fatalf("the job on deck names cluster %q, want a", j.GetClusterName())
	}
	setStatus("b", "active")
	d1.armed(t, 1)

	// The deck submits; the controller dies before any write lands.
	d1.gate.hold()
	be.set(holder, resourcemanager.PhaseRunning, "1/1 pods running")
	d1.touch(holder)
	waitFor(t, "the job on deck submitted", func() bool { return d1.dispatched(next) })
	d1.stop()
	if j := env.Job(t, next); j.GetReason() != "Next" {
		t.Fatalf("after the crash the job is %s/%s, want Pending/Next", j.GetStatus(), j.GetReason())
	}

	d2 := startDeck(t, env, be)
	d2.waitJob(t, holder, "Running", "", "")
	j := d2.waitJob(t, next, "Pending", "Dispatching", "")
	if j.GetClusterName() != "a" {
		t.Fatalf("after the restart the job went to cluster %q, want a", j.GetClusterName())
	}
	// Its submission starts before the write that records the pick, and
	// may return after it.
	waitFor(t, "the job submitted again", func() bool {
		be.mu.Lock()
		defer be.mu.Unlock()
		return len(be.clusters[next]) >= 2
	})
	be.mu.Lock()
	defer be.mu.Unlock()
	if got := be.clusters[next]; slices.ContainsFunc(got, func(c string) bool { return c != "a" }) {
		t.Errorf("the job was submitted to %v; want a, again after the restart, and nowhere else", got)
	}
}

// A cluster put in maintenance takes no new job, also from the deck: its
// job on deck waits there (it may go nowhere else) and is submitted once
// the cluster is active again.
func TestTheDeckHoldsWhileItsClusterIsInMaintenance(t *testing.T) {
	ctx := context.Background()
	be := newScripted()
	be.startPhase = resourcemanager.PhasePending
	env := apitest.Start(t, map[string]string{"local": "test"})
	d := startDeck(t, env, be)
	setStatus := func(status string) {
		t.Helper()
		if _, err := falconv1.NewClusterServiceClient(env.UserConn).SetClusterStatus(ctx, &falconv1.SetClusterStatusRequest{Name: "local", Status: status}); err != nil {
			t.Fatal(err)
		}
	}
	holder := env.Create(t, "holder", map[string]*falconv1.TaskSpec{"main": slotTask}).GetJobs()[0].GetId()
	next := env.Create(t, "next", map[string]*falconv1.TaskSpec{"main": slotTask}).GetJobs()[0].GetId()
	d.waitJob(t, next, "Pending", "Next", "")
	d.armed(t, 1)
	setStatus("maintenance")
	d.armed(t, 0)
	be.set(holder, resourcemanager.PhaseRunning, "1/1 pods running")
	d.touch(holder)
	d.waitJob(t, holder, "Running", "", "")
	if d.dispatched(next) {
		t.Fatal("the job on deck was submitted to a cluster in maintenance")
	}
	if j := env.Job(t, next); j.GetReason() != "Next" || j.GetClusterName() != "local" {
		t.Fatalf("the job on deck is %s/%s on %q while its cluster is in maintenance, want Pending/Next on local", j.GetStatus(), j.GetReason(), j.GetClusterName())
	}
	setStatus("active")
	d.waitJob(t, next, "Pending", "Dispatching", "")
	waitFor(t, "the job on deck submitted", func() bool { return d.dispatched(next) })
}
