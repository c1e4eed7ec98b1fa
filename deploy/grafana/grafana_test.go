package grafana_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	compute "google.golang.org/api/compute/v1"
	container "google.golang.org/api/container/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/provider/gke"
	"github.com/falconhq/falcon/internal/provider/kube"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/stack"
	"github.com/falconhq/falcon/internal/testenv/fakegke"
	"github.com/falconhq/falcon/internal/testenv/gkeenv"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	GridPos *struct{ H, W, X, Y int } `json:"gridPos"`
}

func load(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("falcon.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("falcon.json: %v", err)
	}
	return d
}

// panels flattens rows.
func (d dashboard) all() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// metricName matches what a PromQL expression names as a metric: Falcon's
// and the gRPC middleware's. Label names and functions never start so.
var metricName = regexp.MustCompile(`\b(falcon_[a-z0-9_]+|grpc_server_[a-z0-9_]+)\b`)

// family maps a series name to its metric family: histograms are queried
// by their _bucket, _sum and _count series.
func family(name string, histograms map[string]bool) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok && histograms[base] {
			return base
		}
	}
	return name
}

// queried is every metric the dashboard's panels query, with the panels
// that query it.
func queried(t *testing.T, d dashboard) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, p := range d.all() {
		for _, tg := range p.Targets {
			for _, m := range metricName.FindAllString(tg.Expr, -1) {
				out[m] = append(out[m], p.Title)
			}
		}
	}
	return out
}

func TestDashboardIsWellFormed(t *testing.T) {
	d := load(t)
	if d.UID == "" || d.Title == "" {
		t.Fatal("the dashboard needs a uid and a title")
	}
	ids := map[int]string{}
	for _, p := range d.all() {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Title == "" || p.GridPos == nil {
			t.Errorf("panel %d has no title or position", p.ID)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") || strings.Count(tg.Expr, "{") != strings.Count(tg.Expr, "}") {
				t.Errorf("panel %q: unbalanced expression %q", p.Title, tg.Expr)
			}
		}
	}
	// What the issue asks the dashboard to show.
	q := queried(t, d)
	for _, want := range []string{
		"falcon_job_dispatch_latency_seconds_bucket", "falcon_jobs", "falcon_jobs_finished_total",
		"falcon_queue_waiting_jobs", "falcon_node_pools", "falcon_node_pool_creates_total",
		"falcon_node_pool_reuses_total", "falcon_node_pool_deletes_total", "falcon_reservation_nodes",
		"falcon_rm_cycle_seconds_bucket", "grpc_server_handled_total",
	} {
		if len(q[want]) == 0 {
			t.Errorf("no panel queries %s", want)
		}
	}
}

// TestDashboardMetricsAreExported runs `falcon dev` with a GKE cluster
// that has a reservation, runs three TPU experiments of one shape (one
// reuses another's pool; the pools are then deleted) and four on a plain
// Kubernetes edge (one queue, its slot handed over), scrapes /metrics
// while they run and after, and checks that every metric the dashboard
// queries was exported.
func TestDashboardMetricsAreExported(t *testing.T) {
	want := queried(t, load(t))
	kc := kubeenv.Start(t, kubeenv.WithName("grafana"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const project, zone, gkeName, ns = "proj", "us-central1-a", "edge", "falcon-jobs"
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
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- stack.Dev(ctx, stack.DevConfig{
			DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Interval: 200 * time.Millisecond,
			Ready: func(h, g string) { ready <- [2]string{h, g} },
			GKE: stack.GKEConfig{
				Connect: func(ctx context.Context) (*gke.Clients, error) {
					cs, err := container.NewService(ctx, fake.ContainerOptions()...)
					if err != nil {
						return nil, err
					}
					cp, err := compute.NewService(ctx, fake.ComputeOptions()...)
					if err != nil {
						return nil, err
					}
					return &gke.Clients{Container: cs, Compute: cp, Tokens: join.TokenSource()}, nil
				},
				PoolOptions: []gke.Option{gke.WithPolling(50*time.Millisecond, 200*time.Millisecond)},
				PoolTiming:  &timing,
			},
		})
	}()
	var addrs [2]string
	select {
	case addrs = <-ready:
	case err := <-done:
		t.Fatalf("falcon dev: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("falcon dev did not start")
	}
	t.Cleanup(func() { cancel(); <-done })
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
	// The same apiserver as a plain Kubernetes edge, whose queue hands its
	// slot over on the deck: a TPU node that takes every job at once, and
	// four jobs in one queue. (The handover histogram's series exist from
	// the start; on an idle machine the cycle may take every handover
	// before the deck does.)
	const kubeNS = "falcon-kube"
	if _, err := kc.CreateNamespace(ctx, kubeNS); err != nil {
		t.Fatal(err)
	}
	capacity := corev1.ResourceList{kubeenv.ResourceTPU: resource.MustParse("64"), corev1.ResourcePods: resource.MustParse("100")}
	if _, err := kc.AddNodes(ctx, 1, map[string]string{kubeenv.LabelGKETPUAccelerator: "tpu-v6e-slice", kubeenv.LabelGKETPUTopology: "2x2"},
		[]corev1.Taint{{Key: string(kubeenv.ResourceTPU), Value: "present", Effect: corev1.TaintEffectNoSchedule}}, capacity); err != nil {
		t.Fatal(err)
	}
	if _, err := falconv1.NewClusterServiceClient(conn).RegisterCluster(ctx, &falconv1.RegisterClusterRequest{Cluster: &falconv1.Cluster{
		Name: "kube-edge", Backend: kube.BackendName, Kubeconfig: kc.KubeconfigPath(), KubeContext: kc.Context(),
		Namespace: kubeNS, AcceleratorTypes: []string{"v6e"},
	}}); err != nil {
		t.Fatal(err)
	}
	exps := falconv1.NewExperimentServiceClient(conn)
	var ids []string
	// run creates n one-second experiments of a shape on a cluster.
	run := func(n int, name, cluster, typ, topo string, hosts int32) {
		for i := range n {
			exp, err := exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
				Name: fmt.Sprintf("%s-%d", name, i), ClusterName: cluster,
				RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "python train.py", Image: "python:3.12", Replica: hosts,
					DeviceType: typ, DeviceTopo: topo, Envs: map[string]string{"FALCON_TEST_DURATION": "1s"}}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, exp.GetId())
		}
	}
	run(4, "dash-kube", "kube-edge", "v6e", "2x2", 1)
	// Pools take longer to create than jobs run, so the third job is still
	// waiting when the first ends, and takes its pool (a reuse).
	run(3, "dash", "gke-edge", "v5p", "2x2x2", 2)

	seen := map[string]bool{}
	histograms := map[string]bool{}
	scrape := func() {
		resp, err := http.Get("http://" + addrs[0] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("/metrics: %v", err)
		}
		for name, f := range fams {
			if len(f.GetMetric()) > 0 {
				seen[name] = true
			}
			if f.GetType() == dto.MetricType_HISTOGRAM {
				histograms[name] = true
			}
		}
	}
	finished := func(id string) bool {
		x, err := exps.GetExp(ctx, &falconv1.GetExpRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		switch x.GetStatus() {
		case "Succeeded":
			return true
		case "Failed", "Aborted":
			t.Fatalf("experiment %s %s: %s %s", id, x.GetStatus(), x.GetReason(), x.GetMessage())
		}
		return false
	}
	deadline := time.Now().Add(2 * time.Minute)
	allFinished := func() bool {
		for _, id := range ids {
			if !finished(id) {
				return false
			}
		}
		return true
	}
	for !allFinished() {
		scrape() // while they run: jobs in flight, pools owned, queues
		if time.Now().After(deadline) {
			t.Fatal("the experiments did not succeed in 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// After: the pool deleted, counters of ended jobs.
	for end := time.Now().Add(30 * time.Second); !seen["falcon_node_pool_deletes_total"] && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		scrape()
	}
	scrape()

	var missing []string
	for m, panels := range want {
		if !seen[family(m, histograms)] {
			missing = append(missing, fmt.Sprintf("%s (panels %q)", m, panels))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("metrics the dashboard queries that falcon dev never exported:\n  %s", strings.Join(missing, "\n  "))
	}
}
