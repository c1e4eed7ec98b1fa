package probe_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/probe"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
	"github.com/falconhq/falcon/internal/xpk"
	"github.com/falconhq/falcon/internal/xpk/xpktest"
)

func TestMain(m *testing.M) { xpktest.Main(m) }

var probedAt = time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)

// xpkCluster registers an xpk cluster whose xpk is the test double, its
// state in a file seeded with rows; env steers the double.
func xpkCluster(t testing.TB, name string, rows map[string]xpktest.Row, env ...string) (*falconv1.Cluster, xpk.Credentials) {
	t.Helper()
	state := filepath.Join(t.TempDir(), "state.json")
	if rows != nil {
		xpktest.WriteState(t, state, rows)
	}
	c := &falconv1.Cluster{Name: name, Backend: "xpk", Project: "p", Location: "us-east5-a", GkeCluster: name,
		XpkPath: xpktest.Binary(t), ProbeTimeoutS: 1, Status: "active"}
	return c, xpk.Static(append([]string{"FAKEXPK_STATE=" + state}, env...))
}

// perCluster gives each cluster its own environment, as Gcloud gives each
// its own kubeconfig.
type perCluster map[string]xpk.Credentials

func (p perCluster) Env(ctx context.Context, c xpk.Cluster) ([]string, error) {
	return p[c.Name].Env(ctx, c)
}

func row(status, running, message string) xpktest.Row {
	return xpktest.Row{Created: "2026-12-01T09:00:00Z", Priority: "medium", Needed: "4", Running: running, Status: status, Message: message, StatusTime: "2026-12-01T09:00:05Z"}
}

// Design 001, acceptance table 2 (ClusterProber), for xpk clusters: the
// probe runs `xpk workload list` through the double.
func TestClusterProberXpk(t *testing.T) {
	normal, normalCreds := xpkCluster(t, "normal", map[string]xpktest.Row{
		"a": row("QuotaReserved", "", "couldn't assign flavors"), "b": row("Admitted", "", "Admitted by ClusterQueue cluster-queue"),
		"c": row("Admitted", "4", "Admitted by ClusterQueue cluster-queue"), "d": row("Finished", "4", "JobSet finished successfully"),
	})
	slow, slowCreds := xpkCluster(t, "slow", nil, "FAKEXPK_DELAY=20s")
	failing, failingCreds := xpkCluster(t, "failing", nil, "FAKEXPK_FAIL=1:ERROR: (gcloud.container.clusters.get-credentials) ResponseError: code=404, message=Not found: projects/p/zones/us-east5-a/clusters/failing.")
	empty, emptyCreds := xpkCluster(t, "empty", map[string]xpktest.Row{})
	garbled, garbledCreds := xpkCluster(t, "garbled", nil, "FAKEXPK_LIST_OUTPUT=NAME   STATE\nx      Running")
	missing, missingCreds := xpkCluster(t, "missing", nil)
	missing.XpkPath = filepath.Join(t.TempDir(), "no-xpk-here")

	creds := perCluster{"normal": normalCreds, "slow": slowCreds, "failing": failingCreds, "empty": emptyCreds, "garbled": garbledCreds, "missing": missingCreds}
	p := probe.New(probe.WithXpk(xpk.New(), creds), probe.WithClock(func() time.Time { return probedAt }))
	clusters := []*falconv1.Cluster{normal, slow, failing, empty, garbled, missing}
	start := time.Now()
	got := p.Probe(context.Background(), clusters)
	took := time.Since(start)

	tests := []struct {
		name      string
		i         int
		reachable bool
		queued    int32
		running   int32
		errHas    string
	}{
		{"正常探测 normal: QUEUED and RUNNING rows counted", 0, true, 2, 1, ""},
		{"探测超时 timeout: unreachable, the error says so", 1, false, 0, 0, "probe timed out after 1s"},
		{"xpk命令失败 command failure: unreachable with stderr", 2, false, 0, 0, "Not found: projects/p/zones/us-east5-a/clusters/failing"},
		{"空集群 empty cluster: reachable, zero and zero", 3, true, 0, 0, ""},
		{"unparseable output: the probe says so", 4, false, 0, 0, "cannot read the output of xpk workload list"},
		{"xpk path that does not exist: reported by the probe", 5, false, 0, 0, "could not run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := got[tt.i]
			if r.GetCluster() != clusters[tt.i].GetName() || r.GetReachable() != tt.reachable {
				t.Fatalf("probe %+v: want cluster %s reachable=%v", r, clusters[tt.i].GetName(), tt.reachable)
			}
			if tt.reachable && (r.QueueDepth == nil || r.GetQueueDepth() != tt.queued || r.GetRunningCount() != tt.running || r.GetError() != "") {
				t.Errorf("probe %+v: want queue_depth=%d running_count=%d and no error", r, tt.queued, tt.running)
			}
			if !tt.reachable && (r.QueueDepth != nil || r.RunningCount != nil || !strings.Contains(r.GetError(), tt.errHas)) {
				t.Errorf("probe %+v: want no counts and an error containing %q", r, tt.errHas)
			}
		})
	}
	t.Run("probed_at 时间 is ISO 8601", func(t *testing.T) { checkProbedAt(t, got[0]) })
	// In parallel: the whole round takes the slowest timeout (1s), not the
	// sum of six probes.
	if took > 4*time.Second {
		t.Errorf("probing 6 clusters took %s; in parallel it is bounded by the 1s timeout", took)
	}
}

func checkProbedAt(t *testing.T, r *falconv1.ClusterProbe) {
	t.Helper()
	raw, err := protojson.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"probed_at":"2026-12-01T10:30:00Z"`)) && !bytes.Contains(raw, []byte(`"probedAt":"2026-12-01T10:30:00Z"`)) {
		t.Errorf("probe as JSON %s: want probed_at 2026-12-01T10:30:00Z", raw)
	}
	if _, err := time.Parse(time.RFC3339, r.GetProbedAt().AsTime().Format(time.RFC3339)); err != nil || !r.GetProbedAt().AsTime().Equal(probedAt) {
		t.Errorf("probed_at %v, want %v", r.GetProbedAt().AsTime(), probedAt)
	}
}

// Table 2 for a Kubernetes cluster, probed through a real kube-apiserver:
// Falcon's Jobs there are counted, then the apiserver is stopped (SIGSTOP:
// it holds connections and never answers) for the timeout, and killed for
// a failure.
func TestClusterProberKube(t *testing.T) {
	ctx := context.Background()
	kc := kubeenv.Start(t, kubeenv.WithName("edge-probe"))
	cs := kc.Clientset()
	if _, err := kc.AddNodes(ctx, 1, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	cl := &falconv1.Cluster{Name: "edge-probe", Backend: "kubernetes", KubeContext: kc.Context(), Kubeconfig: kc.KubeconfigPath(), ProbeTimeoutS: 2, Status: "active"}
	cfg := kc.RESTConfig()
	p := probe.New(probe.WithKube(func(context.Context, *falconv1.Cluster) (*rest.Config, string, error) { return cfg, "default", nil }),
		probe.WithClock(func() time.Time { return probedAt }))

	t.Run("空集群 empty cluster: reachable, zero and zero", func(t *testing.T) {
		r := p.ProbeOne(ctx, cl)
		if !r.GetReachable() || r.QueueDepth == nil || r.GetQueueDepth() != 0 || r.GetRunningCount() != 0 {
			t.Errorf("probe %+v: want reachable with 0 queued and 0 running", r)
		}
		checkProbedAt(t, r)
	})

	t.Run("正常探测 normal: Falcon's Jobs waiting and running", func(t *testing.T) {
		suspend := true
		mk := func(name string, suspended bool, labels map[string]string) {
			j := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
				Spec: batchv1.JobSpec{
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers:    []corev1.Container{{Name: "task", Image: "busybox", Env: []corev1.EnvVar{{Name: "FALCON_TEST_RUN_FOREVER", Value: "1"}}}},
					}},
				},
			}
			if suspended {
				j.Spec.Suspend = &suspend
			}
			if _, err := cs.BatchV1().Jobs("default").Create(ctx, j, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		falcon := map[string]string{render.LabelManagedBy: render.ManagedBy}
		mk("falcon-waiting-1", true, falcon)
		mk("falcon-waiting-2", true, falcon)
		mk("falcon-running", false, falcon)
		mk("not-falcons", false, nil)
		var r *falconv1.ClusterProbe
		deadline := time.Now().Add(60 * time.Second)
		for {
			r = p.ProbeOne(ctx, cl)
			if r.GetRunningCount() == 1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond) // polling a real cluster's Job status
		}
		if !r.GetReachable() || r.GetQueueDepth() != 2 || r.GetRunningCount() != 1 {
			t.Errorf("probe %+v: want 2 queued and 1 running (the Job without Falcon's label not counted)", r)
		}
	})

	t.Run("探测超时 timeout: a stopped apiserver never answers", func(t *testing.T) {
		pid := apiserverPID(t, kc.Dir())
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(pid, syscall.SIGCONT)
		waitStopped(t, pid)
		// A new client: the old one's connection is already open.
		stopped := probe.New(probe.WithKube(func(context.Context, *falconv1.Cluster) (*rest.Config, string, error) {
			return kc.RESTConfig(), "default", nil
		}),
			probe.WithClock(func() time.Time { return probedAt }))
		start := time.Now()
		r := stopped.ProbeOne(ctx, cl)
		took := time.Since(start)
		if r.GetReachable() || r.GetError() != "probe timed out after 2s" || r.QueueDepth != nil {
			t.Errorf("probe %+v: want unreachable, \"probe timed out after 2s\"", r)
		}
		if took < 2*time.Second || took > 5*time.Second {
			t.Errorf("probe took %s, want its 2s timeout", took)
		}
	})

	t.Run("命令失败 failure: an apiserver that is down is unreachable with the error", func(t *testing.T) {
		kc.StopAPIServer()
		r := p.ProbeOne(ctx, cl)
		if r.GetReachable() || !strings.Contains(r.GetError(), "connection refused") {
			t.Errorf("probe %+v: want unreachable with connection refused", r)
		}
	})
}

// apiserverPID finds the kube-apiserver of the cluster in dir.
// waitStopped waits until every thread of pid is stopped: SIGSTOP takes
// effect as each thread is next scheduled, and on a loaded machine one
// still running answered a request sent at once (seen in CI).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		running := 0
		for _, task := range tasks {
			raw, err := os.ReadFile(task)
			if err != nil {
				continue // the thread is gone
			}
			// The state follows the command name, which is in parentheses.
			if i := strings.LastIndexByte(string(raw), ')'); i < 0 || i+2 >= len(raw) || raw[i+2] != 'T' {
				running++
			}
		}
		if len(tasks) > 0 && running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver %d: %d of %d threads not stopped after SIGSTOP", pid, running, len(tasks))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func apiserverPID(t *testing.T, dir string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if filepath.Base(args[0]) == "kube-apiserver" && strings.Contains(string(raw), dir) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	t.Fatalf("no kube-apiserver of %s running", dir)
	return 0
}
