package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/spf13/pflag"
	compute "google.golang.org/api/compute/v1"
	container "google.golang.org/api/container/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/provider/gke"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/stack"
	"github.com/falconhq/falcon/internal/testenv/fakegke"
	"github.com/falconhq/falcon/internal/testenv/gkeenv"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// TestPoolPolicyReachesTheManager runs falcon dev's stack with a GKE
// cluster (fakegke joined to a real kube-apiserver) under the pool flags
// as the controller and dev parse them, and runs jobs of one shape in two
// patterns, each with spec (the default) beside it so that the pattern is
// shown to tell the policies apart:
//   - three jobs at once, pools taking longer to create than jobs run: under
//     spec a job still waiting when another ends takes its pool; under
//     per-job every job gets a pool of its own;
//   - two jobs one after the other: under spec the first job's pool is
//     deleted when it ends, as nobody waits; under linger=10m it waits
//     idle, and the second job takes it;
//   - three jobs at once under cap=1: one pool of the shape at most, so
//     all three run on it, one after the other.
func TestPoolPolicyReachesTheManager(t *testing.T) {
	kc := kubeenv.Start(t, kubeenv.WithName("poolpolicy"))
	for _, tc := range []struct {
		policy   string
		together bool
		n        int
		reuse    bool
		pools    int // distinct pools the jobs ran on; 0: not checked
	}{
		{"spec", true, 3, true, 0}, {"per-job", true, 3, false, 3},
		{"spec", false, 2, false, 0}, {"linger=10m", false, 2, true, 1},
		{"cap=1", true, 3, true, 1},
	} {
		name := fmt.Sprintf("%s/%d one after the other", tc.policy, tc.n)
		if tc.together {
			name = fmt.Sprintf("%s/%d at once", tc.policy, tc.n)
		}
		t.Run(name, func(t *testing.T) {
			var pools poolFlags
			fs := pflag.NewFlagSet("dev", pflag.ContinueOnError)
			pools.flags(fs)
			if err := fs.Parse([]string{"--pool-policy", tc.policy}); err != nil {
				t.Fatal(err)
			}
			gc, err := pools.config()
			if err != nil {
				t.Fatal(err)
			}
			ran := runJobs(t, kc, gc, tc.policy, tc.n, tc.together)
			distinct := map[string]bool{}
			for _, p := range ran {
				distinct[p] = true
			}
			if reused := len(distinct) < len(ran); reused != tc.reuse {
				t.Errorf("--pool-policy %s: the jobs ran on pools %v; want a pool reused: %v", tc.policy, ran, tc.reuse)
			}
			if tc.pools > 0 && len(distinct) != tc.pools {
				t.Errorf("--pool-policy %s: the jobs ran on %d pools %v, want %d", tc.policy, len(distinct), ran, tc.pools)
			}
		})
	}
}

// runJobs serves falcon dev with gc's pool policy (its timing made fast
// for a test), runs n jobs of one shape, all submitted at once when
// together, else each once the one before has ended, and returns the node
// pool each ran on.
func runJobs(t *testing.T, kc *kubeenv.Cluster, gc stack.GKEConfig, policy string, n int, together bool) []string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const project, zone, gkeName = "proj", "us-central1-a", "edge"
	ns := fmt.Sprintf("falcon-%d", time.Now().UnixNano())
	if _, err := kc.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fake := fakegke.New(fakegke.WithLatency(2*time.Second, 100*time.Millisecond))
	t.Cleanup(fake.Close)
	join := gkeenv.Join(t, fake, kc, project, zone, gkeName)
	fake.SetReservation(project, zone, "res-1", 8, 0)
	timing := resourcemanager.PoolTiming{
		ListEvery: 100 * time.Millisecond, PollInitial: 100 * time.Millisecond, PollMax: 300 * time.Millisecond,
		Grace: 2 * time.Second, DeleteAttempts: 3, DeleteBackoffInitial: 100 * time.Millisecond, DeleteBackoffMax: 300 * time.Millisecond,
		ReportEvery: 200 * time.Millisecond,
	}
	gc.PoolTiming = &timing
	gc.PoolOptions = append(gc.PoolOptions, gke.WithPolling(50*time.Millisecond, 200*time.Millisecond))
	gc.Connect = func(ctx context.Context) (*gke.Clients, error) {
		cs, err := container.NewService(ctx, fake.ContainerOptions()...)
		if err != nil {
			return nil, err
		}
		cp, err := compute.NewService(ctx, fake.ComputeOptions()...)
		if err != nil {
			return nil, err
		}
		return &gke.Clients{Container: cs, Compute: cp, Tokens: join.TokenSource()}, nil
	}
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- stack.Dev(ctx, stack.DevConfig{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Interval: 200 * time.Millisecond,
			Ready: func(h, g string) { ready <- [2]string{h, g} }, GKE: gc})
	}()
	var addrs [2]string
	select {
	case addrs = <-ready:
	case err := <-done:
		t.Fatalf("falcon dev: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("falcon dev did not start")
	}
	defer func() { cancel(); <-done }()
	conn, err := grpc.NewClient(addrs[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := falconv1.NewClusterServiceClient(conn).RegisterCluster(ctx, &falconv1.RegisterClusterRequest{Cluster: &falconv1.Cluster{
		Name: "gke-edge", Backend: gke.BackendName, Project: project, Location: zone, GkeCluster: gkeName,
		DefaultReservation: "res-1", AcceleratorTypes: []string{"v5p"}, Namespace: ns,
	}}); err != nil {
		t.Fatal(err)
	}
	exps := falconv1.NewExperimentServiceClient(conn)
	jobs := falconv1.NewJobServiceClient(conn)
	create := func(i int) string {
		exp, err := exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
			Name: fmt.Sprintf("policy-%d", i), ClusterName: "gke-edge",
			RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "python train.py", Image: "python:3.12", Replica: 2,
				DeviceType: "v5p", DeviceTopo: "2x2x2", Envs: map[string]string{"FALCON_TEST_DURATION": "1s"}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return exp.GetId()
	}
	var ids []string
	if together {
		for i := range n {
			ids = append(ids, create(i))
		}
	}
	var pools []string
	for i := range n {
		if !together {
			ids = append(ids, create(i))
		}
		// Wait for the experiment to end, on the server's event stream
		// (its last event is marked terminal).
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
		stream, err := exps.WatchExp(wctx, &falconv1.WatchExpRequest{Id: ids[i]})
		if err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := stream.Recv()
			if err != nil {
				t.Fatalf("--pool-policy %s: experiment %d did not end: %v", policy, i, err)
			}
			if ev.GetTerminal() {
				break
			}
		}
		wcancel()
		x, err := exps.GetExp(ctx, &falconv1.GetExpRequest{Id: ids[i]})
		if err != nil {
			t.Fatal(err)
		}
		if x.GetStatus() != "Succeeded" {
			t.Fatalf("--pool-policy %s: experiment %d %s: %s %s", policy, i, x.GetStatus(), x.GetReason(), x.GetMessage())
		}
		j, err := jobs.GetJob(ctx, &falconv1.GetJobRequest{Id: x.GetJobs()[0].GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if j.GetNodePool() == "" {
			t.Fatalf("--pool-policy %s: job %s ran on no node pool", policy, j.GetId())
		}
		pools = append(pools, j.GetNodePool())
		if !together && i+1 < n {
			// A job's success is written the moment its pods end, before
			// the cycle that frees its pool; the next job, created in
			// between, would be waiting when that cycle decides, and spec
			// rightly keeps the pool for it. One after the other means
			// after that decision: the manager's report no longer has the
			// pool owned by this job.
			waitReleased(t, ctx, falconv1.NewClusterServiceClient(conn), "gke-edge", j)
		}
	}
	return pools
}

// waitReleased waits until the cluster's capacity report, made after j
// ended, shows no node pool owned by j.
func waitReleased(t *testing.T, ctx context.Context, cl falconv1.ClusterServiceClient, cluster string, j *falconv1.Job) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := cl.GetClusterStatus(ctx, &falconv1.GetClusterStatusRequest{Name: cluster})
		if err != nil {
			t.Fatal(err)
		}
		owned := false
		for _, p := range st.GetNodePools() {
			owned = owned || p.GetOwnerJobId() == j.GetId()
		}
		if !owned && st.GetReportedAt().AsTime().After(j.GetFinishedAt().AsTime()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s's pool was not released within a minute: %v", j.GetId(), st.GetNodePools())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
