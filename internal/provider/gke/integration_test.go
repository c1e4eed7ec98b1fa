package gke_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"
	compute "google.golang.org/api/compute/v1"
	container "google.golang.org/api/container/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/provider/gke"
	"github.com/falconhq/falcon/internal/provider/kube"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/testenv/apitest"
	"github.com/falconhq/falcon/internal/testenv/fakegke"
	"github.com/falconhq/falcon/internal/testenv/gkeenv"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// The integration tests run the real resource manager against a real API
// server, talking to fakegke through Google's client libraries and to a
// real kube-apiserver (with kwok as the kubelets) that fakegke's pools join
// as nodes. One kube cluster serves every test; each test has its own fake
// GKE, API server, namespace and manager.

var shared *kubeenv.Cluster

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "falcon-gke-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	shared, err = kubeenv.StartCluster(ctx, dir, kubeenv.WithName("gke-it"), kubeenv.WithLogf(log.Printf))
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube cluster:", err)
		return 1
	}
	defer shared.Stop()
	return m.Run()
}

const (
	itProject = "proj"
	itZone    = "us-central1-a"
	gkeName   = "edge"
	falconCl  = "gke-edge"
)

type setup struct {
	createLatency, provisionTimeout time.Duration
	reservation                     *[2]int64 // count, in use
	timing                          func(*resourcemanager.PoolTiming)
	noManager                       bool
	accelerators                    []string                 // the cluster's accelerator_types; default v5p
	rmOpts                          []resourcemanager.Option // more options for the resource manager
}

type fixture struct {
	t       testing.TB
	api     *apitest.Env
	fake    *fakegke.Server
	join    *gkeenv.Cluster
	ns      string
	connect gke.Connector
	timing  resourcemanager.PoolTiming
	opts    []gke.Option
	rmOpts  []resourcemanager.Option
	n       atomic.Int32
}

var nsSeq atomic.Int32

func newFixture(t testing.TB, s setup) *fixture {
	t.Helper()
	if s.createLatency == 0 {
		s.createLatency = time.Second
	}
	if s.provisionTimeout == 0 {
		s.provisionTimeout = time.Minute
	}
	ctx := context.Background()
	f := &fixture{t: t, ns: fmt.Sprintf("gke-it-%d", nsSeq.Add(1))}
	if _, err := shared.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.fake = fakegke.New(fakegke.WithLatency(s.createLatency, 300*time.Millisecond))
	t.Cleanup(f.fake.Close)
	f.join = gkeenv.Join(t, f.fake, shared, itProject, itZone, gkeName)
	reservation := ""
	if s.reservation != nil {
		reservation = "res-1"
		f.fake.SetReservation(itProject, itZone, reservation, s.reservation[0], s.reservation[1])
	}
	f.api = apitest.Start(t, nil)
	accels := s.accelerators
	if accels == nil {
		accels = []string{"v5p"}
	}
	f.rmOpts = s.rmOpts
	if _, err := falconv1.NewClusterServiceClient(f.api.UserConn).RegisterCluster(ctx, &falconv1.RegisterClusterRequest{Cluster: &falconv1.Cluster{
		Name: falconCl, Backend: gke.BackendName, Project: itProject, Location: itZone, GkeCluster: gkeName,
		DefaultReservation: reservation, AcceleratorTypes: accels, Namespace: f.ns,
	}}); err != nil {
		t.Fatal(err)
	}
	f.connect = func(ctx context.Context) (*gke.Clients, error) {
		cs, err := container.NewService(ctx, f.fake.ContainerOptions()...)
		if err != nil {
			return nil, err
		}
		cp, err := compute.NewService(ctx, f.fake.ComputeOptions()...)
		if err != nil {
			return nil, err
		}
		return &gke.Clients{Container: cs, Compute: cp, Tokens: f.join.TokenSource()}, nil
	}
	f.timing = resourcemanager.PoolTiming{
		ListEvery: 100 * time.Millisecond, PollInitial: 100 * time.Millisecond, PollMax: 300 * time.Millisecond,
		Grace: 2 * time.Second, DeleteAttempts: 3, DeleteBackoffInitial: 100 * time.Millisecond, DeleteBackoffMax: 300 * time.Millisecond,
		ReportEvery: 200 * time.Millisecond,
	}
	if s.timing != nil {
		s.timing(&f.timing)
	}
	f.opts = []gke.Option{gke.WithPolling(50*time.Millisecond, 200*time.Millisecond), gke.WithProvisionTimeout(s.provisionTimeout)}
	if !s.noManager {
		f.start()
	}
	return f
}

// manager returns a resource manager with fresh memory, as after a restart.
func (f *fixture) manager() (*resourcemanager.Manager, *gke.Backend) {
	// The informers report to the manager as in production (stack's
	// newManager): the manager looks at a job when its pods change.
	var ptr atomic.Pointer[resourcemanager.Manager]
	b := gke.NewBackend(f.connect, []kube.Option{
		kube.WithOnChange(func() {
			if m := ptr.Load(); m != nil {
				m.Wake()
			}
		}),
		kube.WithOnJobChange(func(id string) {
			if m := ptr.Load(); m != nil {
				m.Touch(id)
			}
		}),
	}, f.opts...)
	opts := append([]resourcemanager.Option{resourcemanager.WithBackend(gke.BackendName, b),
		resourcemanager.WithInterval(200 * time.Millisecond), resourcemanager.WithPoolTiming(f.timing)}, f.rmOpts...)
	mgr := resourcemanager.New(f.api.Conn, opts...)
	ptr.Store(mgr)
	return mgr, b
}

// start runs a manager until the test ends.
func (f *fixture) start() {
	mgr, b := f.manager()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Run(ctx) }()
	f.t.Cleanup(func() { cancel(); <-done; b.Close() })
}

// task is a 2-host v5p slice whose pods run for d (forever when d is 0).
func task(d time.Duration, extra ...string) *falconv1.TaskSpec {
	env := map[string]string{}
	if d == 0 {
		env["FALCON_TEST_RUN_FOREVER"] = "1"
	} else {
		env["FALCON_TEST_DURATION"] = d.String()
	}
	ts := &falconv1.TaskSpec{Command: "python train.py", Image: "python:3.12", Replica: 2, DeviceType: "v5p", DeviceTopo: "2x2x2", Envs: env}
	if len(extra) > 0 {
		ts.SupplyMode = extra[0]
	}
	return ts
}

func (f *fixture) submit(ts *falconv1.TaskSpec) string {
	f.t.Helper()
	exp := f.api.Create(f.t, fmt.Sprintf("it-%d", f.n.Add(1)), map[string]*falconv1.TaskSpec{"main": ts})
	return exp.GetJobs()[0].GetId()
}

// waitJob waits until the job satisfies ok, failing with its last state.
func (f *fixture) waitJob(id, what string, ok func(*falconv1.Job) bool) *falconv1.Job {
	f.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j := f.api.Job(f.t, id)
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("job %s never %s; it is %s/%s %q (pool %q); its pods: %s", id, what, j.GetStatus(), j.GetReason(), j.GetMessage(), j.GetNodePool(), f.podStates(id))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// podStates describes the job's pods as the cluster has them (name,
// phase, node, deletion), so a job that never got where a test waited can
// be told apart from a pod the fake kubelet never moved on.
func (f *fixture) podStates(id string) string {
	pods, err := shared.Clientset().CoreV1().Pods(f.ns).List(context.Background(), metav1.ListOptions{LabelSelector: render.LabelJobID + "=" + id})
	if err != nil {
		return "cannot list: " + err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		st := fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
		if p.DeletionTimestamp != nil {
			st += " (deleting)"
		}
		out = append(out, st)
	}
	return "[" + strings.Join(out, "; ") + "]"
}

func status(s string) func(*falconv1.Job) bool {
	return func(j *falconv1.Job) bool { return j.GetStatus() == s }
}

func reason(r string) func(*falconv1.Job) bool {
	return func(j *falconv1.Job) bool { return j.GetReason() == r }
}

// waitPoolGone waits until the pool is deleted in GKE and its nodes are gone.
func (f *fixture) waitPoolGone(pool string) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := f.fake.Pool(pool); !ok {
			break
		}
		if time.Now().After(deadline) {
			np, _ := f.fake.Pool(pool)
			f.t.Fatalf("node pool %s was not deleted (status %s)", pool, np.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.join.WaitNodes(ctx, pool, 0); err != nil {
		f.t.Fatal(err)
	}
}

// poolNodes names the nodes of pool.
func (f *fixture) poolNodes(pool string) map[string]bool {
	f.t.Helper()
	nodes, err := f.join.Nodes(context.Background(), pool)
	if err != nil {
		f.t.Fatal(err)
	}
	names := map[string]bool{}
	for _, n := range nodes {
		names[n.Name] = true
	}
	return names
}

// kubeJobs lists the Kubernetes Jobs Falcon made for id.
func (f *fixture) kubeJobs(id string) int {
	list, err := shared.Clientset().BatchV1().Jobs(f.ns).List(context.Background(), metav1.ListOptions{LabelSelector: render.LabelJobID + "=" + id})
	if err != nil {
		f.t.Fatal(err)
	}
	return len(list.Items)
}

func TestReservationPathRunsOnThePoolAndDeletesIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{reservation: &[2]int64{8, 2}})
	id := f.submit(task(2 * time.Second))
	j := f.waitJob(id, "provisioning", reason("Provisioning"))
	if !strings.Contains(j.GetMessage(), "reservation projects/proj/zones/us-central1-a/reservations/res-1") || j.GetNodePool() == "" {
		t.Fatalf("provisioning job: %q pool %q", j.GetMessage(), j.GetNodePool())
	}
	pool := j.GetNodePool()
	np, ok := f.fake.Pool(pool)
	if !ok || np.Config.ReservationAffinity == nil || np.Config.ReservationAffinity.Values[0] != "res-1" || np.InitialNodeCount != 2 {
		t.Fatalf("pool %s: %+v", pool, np.Config)
	}
	j = f.waitJob(id, "running", status("Running"))
	// The pods run on the pool's nodes.
	pods, err := shared.Clientset().CoreV1().Pods(f.ns).List(context.Background(), metav1.ListOptions{LabelSelector: render.LabelJobID + "=" + id})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("pods: %d, %v", len(pods.Items), err)
	}
	onPool := f.poolNodes(pool)
	for _, p := range pods.Items {
		if !onPool[p.Spec.NodeName] {
			t.Errorf("pod %s on node %q, not on pool %s", p.Name, p.Spec.NodeName, pool)
		}
	}
	f.waitJob(id, "succeeded", status("Succeeded"))
	f.waitPoolGone(pool)
	// Its Kubernetes Job was deleted before the pool went.
	if n := f.kubeJobs(id); n != 0 {
		t.Errorf("%d Kubernetes Jobs left after the job succeeded on a pooled cluster", n)
	}
	if c, d := f.fake.Creates(pool), f.fake.Deletes(pool); c != 1 || d < 1 {
		t.Errorf("pool %s: %d creates, %d deletes", pool, c, d)
	}
	// The reservation is whole again.
	if _, inUse, _ := f.fake.Reservation(itProject, itZone, "res-1"); inUse != 2 {
		t.Errorf("reservation in use %d after the pool went, want 2", inUse)
	}
}

func TestFallbackToFlexStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{reservation: &[2]int64{8, 7}})
	id := f.submit(task(time.Second))
	j := f.waitJob(id, "provisioning", reason("ProvisioningFallback"))
	if !strings.Contains(j.GetMessage(), "has 1 of 8 nodes free, 2 needed") {
		t.Errorf("fallback message %q", j.GetMessage())
	}
	np, _ := f.fake.Pool(j.GetNodePool())
	if np.Config == nil || !np.Config.FlexStart || np.Config.ReservationAffinity != nil {
		t.Errorf("fallback pool config %+v", np.Config)
	}
	f.waitJob(id, "succeeded", status("Succeeded"))
	f.waitPoolGone(j.GetNodePool())
}

func TestForcedSupplyMode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{reservation: &[2]int64{8, 0}})
	id := f.submit(task(time.Second, "flex-start"))
	j := f.waitJob(id, "provisioning", reason("Provisioning"))
	if !strings.Contains(j.GetMessage(), "supply_mode flex-start") {
		t.Errorf("message %q", j.GetMessage())
	}
	if np, _ := f.fake.Pool(j.GetNodePool()); !np.Config.FlexStart {
		t.Errorf("forced flex-start pool is not flex-start: %+v", np.Config)
	}
	// Forcing a reservation that cannot hold the slice fails the job.
	f2 := newFixture(t, setup{reservation: &[2]int64{2, 1}})
	id2 := f2.submit(task(time.Second, "reservation"))
	j2 := f2.waitJob(id2, "failed", status("Failed"))
	if j2.GetReason() != "NodePoolFailed" || !strings.Contains(j2.GetMessage(), "1 of 2 nodes free") {
		t.Errorf("forced reservation without room: %s %q", j2.GetReason(), j2.GetMessage())
	}
}

// TestWaitingJobReusesThePool: three jobs of one shape. The first's pool
// falls idle while the second is still waiting for its own pool to be
// created, so the second switches to the idle pool and the third takes
// over the pool being created: three jobs, two creates. On a loaded
// machine the first may end before the second starts to acquire, which
// then takes the idle pool, and so does the third: one pool, one create,
// reuse too. Three pools is the failure.
func TestWaitingJobReusesThePool(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{createLatency: 3 * time.Second})
	first := f.submit(task(time.Second))
	second := f.submit(task(time.Second))
	third := f.submit(task(time.Second))
	pools := map[string]int{}
	for _, id := range []string{first, second, third} {
		pools[f.waitJob(id, "succeeded", status("Succeeded")).GetNodePool()]++
	}
	if len(pools) == 3 {
		t.Fatalf("three jobs ran on pools %v; want at most two, one of them reused", pools)
	}
	for p := range pools {
		f.waitPoolGone(p)
	}
	if n := f.creates(); n != len(pools) {
		t.Errorf("%d node pool creates for three same-shape jobs on %d pools, want %d", n, len(pools), len(pools))
	}
}

// creates counts successful node pool creates.
func (f *fixture) creates() int {
	n := 0
	for _, c := range f.fake.Calls() {
		if c.Method == "POST" && strings.HasSuffix(c.Path, "/nodePools") && c.Status < 300 {
			n++
		}
	}
	return n
}

func TestNodePoolFailedCarriesGKEsMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{noManager: true})
	id := f.submit(task(time.Second))
	pool, _ := gke.PoolName(id)
	f.fake.SetCreateOutcome(pool, fakegke.OutcomeStockout)
	f.start()
	j := f.waitJob(id, "failed", status("Failed"))
	if j.GetReason() != "NodePoolFailed" || !strings.Contains(j.GetMessage(), "ZONE_RESOURCE_POOL_EXHAUSTED") {
		t.Fatalf("stockout: %s %q", j.GetReason(), j.GetMessage())
	}
	f.waitPoolGone(pool) // the failed pool is cleaned up
	if f.kubeJobs(id) != 0 {
		t.Error("a Kubernetes Job was created for a job whose pool failed")
	}
}

func TestNodePoolTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{provisionTimeout: 2 * time.Second, noManager: true})
	id := f.submit(task(time.Second))
	pool, _ := gke.PoolName(id)
	f.fake.SetCreateOutcome(pool, fakegke.OutcomeHang)
	f.start()
	j := f.waitJob(id, "failed", status("Failed"))
	if j.GetReason() != "NodePoolTimeout" || !strings.Contains(j.GetMessage(), "not RUNNING") {
		t.Fatalf("hung create: %s %q", j.GetReason(), j.GetMessage())
	}
}

func TestAbortInEveryPhase(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{createLatency: 3 * time.Second})
	abort := func(id string) {
		exp := f.api.Job(t, id).GetExpId()
		if _, err := falconv1.NewExperimentServiceClient(f.api.UserConn).AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp}); err != nil {
			t.Fatal(err)
		}
	}
	// Provisioning: the create is waited out, then the pool is deleted.
	id := f.submit(task(time.Second))
	j := f.waitJob(id, "provisioning", reason("Provisioning"))
	abort(id)
	j = f.waitJob(id, "aborted", status("Aborted"))
	if j.GetAbortedAt() == nil {
		t.Error("aborted_at not set")
	}
	f.waitPoolGone(j.GetNodePool())

	// Running: the Kubernetes Job goes, then the pool.
	id = f.submit(task(0))
	j = f.waitJob(id, "running", status("Running"))
	abort(id)
	j = f.waitJob(id, "aborted", status("Aborted"))
	f.waitPoolGone(j.GetNodePool())
	if n := f.kubeJobs(id); n != 0 {
		t.Errorf("%d Kubernetes Jobs left after abort", n)
	}
}

// TestAbortWhileDispatching: the pool is up and the Kubernetes Job
// submitted, but its pods cannot be created (a quota of zero pods), so the
// job sits in Dispatching. Abort deletes the Job, then the pool.
func TestAbortWhileDispatching(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{})
	ctx := context.Background()
	if _, err := shared.Clientset().CoreV1().ResourceQuotas(f.ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	id := f.submit(task(0))
	j := f.waitJob(id, "dispatching", func(j *falconv1.Job) bool {
		return j.GetReason() == "Dispatching" && j.GetNodePool() != "" && f.kubeJobs(id) == 1
	})
	if _, err := falconv1.NewExperimentServiceClient(f.api.UserConn).AbortExp(ctx, &falconv1.AbortExpRequest{Id: j.GetExpId()}); err != nil {
		t.Fatal(err)
	}
	f.waitJob(id, "aborted", status("Aborted"))
	if n := f.kubeJobs(id); n != 0 {
		t.Errorf("%d Kubernetes Jobs left after an abort while dispatching", n)
	}
	f.waitPoolGone(j.GetNodePool())
}

// TestAbortKeepsThePoolForAWaitingJob: abort never skips the reuse check. A
// pool whose job is aborted while it is being created is taken over by the
// next job (no second create); one whose running job is aborted while a job
// of its shape waits is kept for that job.
func TestAbortKeepsThePoolForAWaitingJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{createLatency: 3 * time.Second})
	abort := func(id string) {
		exp := f.api.Job(t, id).GetExpId()
		if _, err := falconv1.NewExperimentServiceClient(f.api.UserConn).AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp}); err != nil {
			t.Fatal(err)
		}
	}
	// Provisioning.
	a := f.submit(task(0))
	b := f.submit(task(0))
	ja := f.waitJob(a, "provisioning", reason("Provisioning"))
	abort(a)
	f.waitJob(a, "aborted", status("Aborted"))
	jb := f.waitJob(b, "running", status("Running"))
	if jb.GetNodePool() != ja.GetNodePool() || f.creates() != 1 {
		t.Fatalf("after an abort while provisioning, the next job runs on %q (aborted job's pool %q), %d creates", jb.GetNodePool(), ja.GetNodePool(), f.creates())
	}
	// Running: b runs; c is picked and creates its pool; d waits behind it.
	// Aborting b frees its pool while c's is still being created: c
	// switches to it and d takes over the pool being created. Still two
	// creates for four jobs.
	c := f.submit(task(0))
	d := f.submit(task(time.Second))
	f.waitJob(c, "provisioning", reason("Provisioning"))
	abort(b)
	f.waitJob(b, "aborted", status("Aborted"))
	jc := f.waitJob(c, "running", status("Running"))
	jd := f.waitJob(d, "succeeded", status("Succeeded"))
	if jc.GetNodePool() != jb.GetNodePool() || jd.GetNodePool() == jb.GetNodePool() {
		t.Errorf("pools: aborted b %q, c %q, d %q; want c on b's pool and d on the one created for c", jb.GetNodePool(), jc.GetNodePool(), jd.GetNodePool())
	}
	abort(c)
	f.waitJob(c, "aborted", status("Aborted"))
	f.waitPoolGone(jb.GetNodePool())
	f.waitPoolGone(jd.GetNodePool())
	if n := f.creates(); n != 2 {
		t.Errorf("%d creates for four jobs, want 2", n)
	}
}

// TestATakenOverPoolThatFailsIsReplaced: a pool whose job is aborted while
// it is being created is taken over by the next job; when GKE then reports
// the pool failed (a stockout), that is not the next job's failure: it gets
// a pool of its own and runs, and the failed pool is deleted.
func TestATakenOverPoolThatFailsIsReplaced(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{createLatency: 3 * time.Second, noManager: true})
	a := f.submit(task(0))
	b := f.submit(task(time.Second))
	failing, _ := gke.PoolName(a)
	f.fake.SetCreateOutcome(failing, fakegke.OutcomeStockout)
	f.start()
	f.waitJob(a, "provisioning", reason("Provisioning"))
	f.abort(a)
	f.waitJob(a, "aborted", status("Aborted"))
	f.waitJob(b, "on the aborted job's pool", func(j *falconv1.Job) bool { return j.GetNodePool() == failing })
	own, _ := gke.PoolName(b)
	jb := f.waitJob(b, "provisioning its own pool", func(j *falconv1.Job) bool { return j.GetNodePool() == own })
	if want := "node pool " + failing + ", taken over from a job that ended, failed ("; !strings.Contains(jb.GetMessage(), want) || !strings.Contains(jb.GetMessage(), "ZONE_RESOURCE_POOL_EXHAUSTED") {
		t.Errorf("the job given its own pool says %q; want it to say %q and GKE's reason", jb.GetMessage(), want)
	}
	f.waitJob(b, "succeeded", status("Succeeded"))
	f.waitPoolGone(failing)
	f.waitPoolGone(own)
	if n := f.creates(); n != 2 {
		t.Errorf("%d node pool creates accepted, want 2: the aborted job's, and its replacement for the job that took it over", n)
	}
}

func TestDeleteRetriesThenNotesTheFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{})
	// Two transient failures: retried, and the pool goes.
	id := f.submit(task(time.Second))
	pool, _ := gke.PoolName(id)
	f.fake.FailDeletes(pool, 2, 503)
	f.waitJob(id, "succeeded", status("Succeeded"))
	f.waitPoolGone(pool)
	if d := f.fake.Deletes(pool); d < 1 {
		t.Errorf("deletes %d", d)
	}

	// Failures past the attempts: the job keeps its outcome and its
	// Message says the pool could not be deleted.
	id = f.submit(task(time.Second))
	pool, _ = gke.PoolName(id)
	f.fake.FailDeletes(pool, 1000, 500)
	j := f.waitJob(id, "noted", func(j *falconv1.Job) bool {
		return strings.Contains(j.GetMessage(), "could not be deleted after 3 attempts")
	})
	if j.GetStatus() != "Succeeded" {
		t.Errorf("a failed pool deletion changed the outcome to %s", j.GetStatus())
	}
}

func TestOrphanSweepSparesAPoolUnderCreation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{createLatency: 2 * time.Second, timing: func(t *resourcemanager.PoolTiming) { t.Grace = 4 * time.Second }})
	ctx := context.Background()
	cs, err := container.NewService(ctx, f.fake.ContainerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	mkPool := func(name, job string) {
		np := &container.NodePool{Name: name, InitialNodeCount: 1, Config: &container.NodeConfig{
			MachineType: "ct5p-hightpu-4t",
			Labels: map[string]string{gke.LabelManagedBy: gke.ManagedBy, gke.LabelJobID: job,
				gke.LabelCreatedAt: fmt.Sprint(time.Now().Unix()), gke.LabelAccelerator: "v5p", gke.LabelTopology: "2x2x1"},
		}}
		if _, err := cs.Projects.Locations.Clusters.NodePools.Create(f.join.Path(), &container.CreateNodePoolRequest{NodePool: np}).Do(); err != nil {
			t.Fatal(err)
		}
	}
	// A pool no job owns, left by a crash: swept once created and past
	// the grace period, never while being created within it.
	f.fake.SetCreateOutcome("falcon-job-orphan0002", fakegke.OutcomeHang)
	mkPool("falcon-job-orphan0001", "job-orphan0001")
	mkPool("falcon-job-orphan0002", "job-orphan0002")
	f.waitPoolGone("falcon-job-orphan0001")
	time.Sleep(time.Second)
	if _, ok := f.fake.Pool("falcon-job-orphan0002"); !ok {
		t.Fatal("a pool still being created was swept within the grace period")
	}
	// A pool that is not Falcon's is never touched.
	if _, err := cs.Projects.Locations.Clusters.NodePools.Create(f.join.Path(), &container.CreateNodePoolRequest{NodePool: &container.NodePool{
		Name: "default-pool", InitialNodeCount: 1, Config: &container.NodeConfig{MachineType: "e2-standard-4"}}}).Do(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if _, ok := f.fake.Pool("default-pool"); !ok {
		t.Error("the sweep deleted a pool Falcon did not create")
	}
}

func TestCapacityView(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{reservation: &[2]int64{8, 2}})
	id := f.submit(task(0))
	j := f.waitJob(id, "running", status("Running"))
	clusters := falconv1.NewClusterServiceClient(f.api.UserConn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := clusters.GetClusterStatus(context.Background(), &falconv1.GetClusterStatusRequest{Name: falconCl})
		if err != nil {
			t.Fatal(err)
		}
		var pool *falconv1.NodePoolStatus
		for _, p := range st.GetNodePools() {
			if p.GetName() == j.GetNodePool() {
				pool = p
			}
		}
		var q *falconv1.QueueStatus
		for _, x := range st.GetQueues() {
			if x.GetTopology() == "v5p:2x2x2" { // a TPU queue is its generation and topology
				q = x
			}
		}
		r := st.GetReservation()
		if pool != nil && pool.GetOwnerJobId() == id && pool.GetTopology() == "2x2x2" && pool.GetStatus() == "RUNNING" &&
			q != nil && q.GetRunning() == 1 && r.GetFree() == 4 && r.GetCount() == 8 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("capacity view never showed the running job's pool and queue: %v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCrashRestartConverges restarts the controller before every cycle of
// one job's lifecycle: each cycle runs in a manager with no memory. In the
// end exactly one pool was created and deleted, one Kubernetes Job existed,
// and the job is terminal.
func TestCrashRestartConverges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{noManager: true, reservation: &[2]int64{8, 0}})
	id := f.submit(task(time.Second))
	pool, _ := gke.PoolName(id)
	ctx := context.Background()
	kubeJobsSeen := 0
	deadline := time.Now().Add(60 * time.Second)
	for step := 0; ; step++ {
		mgr, b := f.manager()
		if _, err := mgr.Reconcile(ctx); err != nil {
			t.Logf("step %d: %v", step, err)
		}
		b.Close()
		kubeJobsSeen = max(kubeJobsSeen, f.kubeJobs(id))
		j := f.api.Job(t, id)
		_, exists := f.fake.Pool(pool)
		if j.GetStatus() == "Succeeded" && !exists {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no convergence after %d restarts: job %s/%s %q, pool exists %v", step, j.GetStatus(), j.GetReason(), j.GetMessage(), exists)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c := f.fake.Creates(pool); c != 1 {
		t.Errorf("pool created %d times across restarts, want 1", c)
	}
	if kubeJobsSeen != 1 {
		t.Errorf("%d Kubernetes Jobs at once, want 1", kubeJobsSeen)
	}
	if n := f.creates(); n != 1 {
		t.Errorf("%d successful node pool creates, want 1", n)
	}
}

// TestGKEOutageIsRidden: the GKE API answers 503 for a while; calls are
// retried with backoff and the job still gets its pool and succeeds.
func TestGKEOutageIsRidden(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{noManager: true})
	id := f.submit(task(time.Second))
	f.fake.FailNext(8, 503)
	f.start()
	j := f.waitJob(id, "succeeded", status("Succeeded"))
	f.waitPoolGone(j.GetNodePool())
	if n := f.creates(); n != 1 {
		t.Errorf("%d creates after an outage, want 1", n)
	}
}

// budget lets a controller take a fixed number of steps (writes to the API
// server or changes on GKE and Kubernetes) and then fails every further
// one, as if the process had died right after its last step.
type budget struct{ left atomic.Int32 }

var errCrashed = errors.New("the controller crashed")

func (b *budget) spend() error {
	if b.left.Add(-1) < 0 {
		return errCrashed
	}
	return nil
}

func (b *budget) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	switch method {
	case falconv1.JobService_UpdateJobStatus_FullMethodName, falconv1.JobService_AppendJobMessage_FullMethodName:
		if err := b.spend(); err != nil {
			return grpcstatus.Error(codes.Unavailable, err.Error())
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// crashing is the gke backend with its mutations charged to a budget.
type crashing struct {
	*gke.Backend
	b *budget
}

func (c crashing) ProvisionPool(ctx context.Context, cl *falconv1.Cluster, j *falconv1.Job) (resourcemanager.Provisioning, error) {
	if err := c.b.spend(); err != nil {
		return resourcemanager.Provisioning{}, err
	}
	return c.Backend.ProvisionPool(ctx, cl, j)
}

func (c crashing) DeletePool(ctx context.Context, cl *falconv1.Cluster, pool string) error {
	if err := c.b.spend(); err != nil {
		return err
	}
	return c.Backend.DeletePool(ctx, cl, pool)
}

func (c crashing) Dispatch(ctx context.Context, cl *falconv1.Cluster, j *falconv1.Job) error {
	if err := c.b.spend(); err != nil {
		return err
	}
	return c.Backend.Dispatch(ctx, cl, j)
}

func (c crashing) Stop(ctx context.Context, cl *falconv1.Cluster, j *falconv1.Job) error {
	if err := c.b.spend(); err != nil {
		return err
	}
	return c.Backend.Stop(ctx, cl, j)
}

// TestCrashAfterEveryStepConverges kills the controller after every single
// step of one job's lifecycle: each controller instance, with no memory of
// the last, gets to take exactly one step (a status write, a pool create or
// delete, a Job submit or delete) and dies. Afterwards exactly one pool was
// created and is gone, exactly one Kubernetes Job ever existed, and the job
// succeeded.
func TestCrashAfterEveryStepConverges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{noManager: true, reservation: &[2]int64{8, 0}})
	id := f.submit(task(time.Second))
	pool, _ := gke.PoolName(id)
	ctx := context.Background()

	// Every Kubernetes Job ever created for the job, by UID.
	w, err := shared.Clientset().BatchV1().Jobs(f.ns).Watch(ctx, metav1.ListOptions{LabelSelector: render.LabelJobID + "=" + id})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	uids := map[string]bool{}
	var mu sync.Mutex
	go func() {
		for ev := range w.ResultChan() {
			if m, ok := ev.Object.(metav1.Object); ok {
				mu.Lock()
				uids[string(m.GetUID())] = true
				mu.Unlock()
			}
		}
	}()

	var b budget
	conn := f.api.Dial(t, grpc.WithPerRPCCredentials(auth.ControllerCredentials(f.api.ControllerSecret)), grpc.WithUnaryInterceptor(b.interceptor))
	deadline := time.Now().Add(90 * time.Second)
	steps := 0
	for {
		b.left.Store(1)
		gb := gke.NewBackend(f.connect, nil, f.opts...)
		mgr := resourcemanager.New(conn, resourcemanager.WithBackend(gke.BackendName, crashing{gb, &b}),
			resourcemanager.WithPoolTiming(f.timing))
		_, _ = mgr.Reconcile(ctx)
		gb.Close()
		if b.left.Load() < 1 {
			steps++
		}
		j := f.api.Job(t, id)
		_, exists := f.fake.Pool(pool)
		if j.GetStatus() == "Succeeded" && !exists {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no convergence after %d steps: job %s/%s %q, pool exists %v", steps, j.GetStatus(), j.GetReason(), j.GetMessage(), exists)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("converged after %d single-step controller lives", steps)
	if steps < 6 {
		t.Errorf("only %d steps: the lifecycle was not cut up", steps)
	}
	if n := f.creates(); n != 1 {
		t.Errorf("%d successful node pool creates, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(uids) != 1 {
		t.Errorf("%d Kubernetes Jobs existed for the job, want 1", len(uids))
	}
}

// countingTokens hands out the cluster's token with a short life, counting
// how often it is asked: what Application Default Credentials do with
// hour-long tokens, in seconds.
type countingTokens struct {
	src   oauth2.TokenSource
	calls atomic.Int32
}

func (c *countingTokens) Token() (*oauth2.Token, error) {
	c.calls.Add(1)
	t, err := c.src.Token()
	if err != nil {
		return nil, err
	}
	short := *t
	short.Expiry = time.Now().Add(11 * time.Second) // oauth2 refreshes 10s early: ~1s of life
	return &short, nil
}

// TestTokensAreRefreshed: the backend's calls to the cluster's apiserver
// (informers included) take their token from the refreshing source, so a
// token expiring under a long-lived controller is replaced, not reused.
func TestTokensAreRefreshed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{noManager: true})
	tokens := &countingTokens{src: f.join.TokenSource()}
	inner := f.connect
	f.connect = func(ctx context.Context) (*gke.Clients, error) {
		c, err := inner(ctx)
		if err != nil {
			return nil, err
		}
		c.Tokens = oauth2.ReuseTokenSource(nil, tokens)
		return c, nil
	}
	f.start()
	f.waitJob(f.submit(task(time.Second)), "succeeded", status("Succeeded"))
	before := tokens.calls.Load()
	time.Sleep(1500 * time.Millisecond) // the last token has expired
	f.waitJob(f.submit(task(time.Second)), "succeeded", status("Succeeded"))
	if after := tokens.calls.Load(); before < 1 || after <= before {
		t.Errorf("token source asked %d times for the first job, %d in all: an expired token was reused", before, after)
	}
}
