package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// BenchmarkKubeDispatchCPU measures Falcon dispatching CPU-only experiments
// (no acquisition: a job hands its queue's slot on once its cluster has
// its Kubernetes Job, not once its pod runs) to three real edge clusters,
// against plain client-go creating the very Jobs Falcon renders in the
// same run, four at a time per cluster (the concurrency Falcon's
// submissions use). Falcon's figure runs from the first experiment created
// through the API (by creators clients at once) to the last Kubernetes Job
// existing, so the API's creates are part of it; the goal is ≥ 0.5× of the
// plain creates. FALCON_BENCH_EXPS sets the count
// (default 1000).
func BenchmarkKubeDispatchCPU(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("FALCON_BENCH_EXPS")); err == nil && v > 0 {
		n = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const plainNS = "plain"
	var edges []*kubeenv.Cluster
	var mu sync.Mutex
	exists := map[string]time.Time{}
	for range 3 {
		c := kubeenv.Start(b)
		for _, ns := range []string{kubeNamespace, plainNS} {
			if _, err := c.CreateNamespace(ctx, ns); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := c.AddNodes(ctx, 2, nil, nil, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100000"),
			corev1.ResourceMemory: resource.MustParse("100000Gi"), corev1.ResourcePods: resource.MustParse("5000")}); err != nil {
			b.Fatal(err)
		}
		f := informers.NewSharedInformerFactory(c.Clientset(), 0)
		note := func(obj any) {
			if j, ok := obj.(*batchv1.Job); ok {
				mu.Lock()
				if _, seen := exists[j.Labels[render.LabelJobID]]; !seen {
					exists[j.Labels[render.LabelJobID]] = time.Now()
				}
				mu.Unlock()
			}
		}
		f.Batch().V1().Jobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note})
		f.Start(ctx.Done())
		f.WaitForCacheSync(ctx.Done())
		edges = append(edges, c)
	}

	// Plain client-go: the same Jobs, created four at a time per cluster.
	plainStart := time.Now()
	var wg sync.WaitGroup
	per := n / len(edges)
	for ei, c := range edges {
		work := make(chan int)
		for range submitConcurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range work {
					id := fmt.Sprintf("plain-%d-%d", ei, k)
					objs, err := render.Render(render.Input{
						Job: &falconv1.Job{Id: id, ExpId: "exp-" + id, Role: "main", TaskSpec: &falconv1.TaskSpec{
							Image: "falcon.test/x", Command: "true", Replica: 1, Envs: map[string]string{"FALCON_TEST_DURATION": "1s"}}},
						ClusterID: c.Name(), ClusterName: c.Name(), Namespace: plainNS,
					})
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := c.Clientset().BatchV1().Jobs(plainNS).Create(ctx, objs.Jobs[0], metav1.CreateOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		go func() {
			for k := range per {
				work <- k
			}
			close(work)
		}()
	}
	wg.Wait()
	plainRate := float64(per*len(edges)) / time.Since(plainStart).Seconds()

	d := startDev(b, "")
	var sb strings.Builder
	sb.WriteString("clusters:\n")
	for _, e := range edges {
		fmt.Fprintf(&sb, "  %s:\n    provider: kubernetes\n    kubeconfig: %s\n    context: %s\n    default_namespace: %s\n    accelerator_types:\n      - {type: cpu, priority: 1}\n",
			e.Name(), e.KubeconfigPath(), e.Context(), kubeNamespace)
	}
	f := filepath.Join(b.TempDir(), "clusters.yaml")
	if err := os.WriteFile(f, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	if r := d.run("", "cluster", "apply", "-f", f); r.code != 0 {
		b.Fatalf("cluster apply: %d %s %s", r.code, r.stdout, r.stderr)
	}
	base := "http://" + d.http
	b.ResetTimer()
	start := time.Now()
	// The creates come from creators clients at once, as a sweep script or
	// a few agents send them: one client creating one at a time would
	// measure its own round trips, not how fast Falcon dispatches.
	ids := make([]string, n)
	var createMs atomic.Int64
	createConcurrently(b, base, n, creators, func(i int) string {
		return fmt.Sprintf(`{"experiment":{"name":"cpu-%d","role_to_task_spec":{"main":{"replica":1,"image":"falcon.test/x",
			"command":"true","envs":{"FALCON_TEST_DURATION":"1s"}}}}}`, i)
	}, func(c benchCreate) {
		ids[c.i] = c.job
		createMs.Add(c.took.Microseconds())
	})
	if b.Failed() {
		b.FailNow()
	}
	created := time.Now()
	// Every experiment's Kubernetes Job, seen by the informers.
	deadline := time.Now().Add(time.Duration(n)*100*time.Millisecond + time.Minute)
	var last time.Time
	for {
		mu.Lock()
		seen := 0
		for _, id := range ids {
			if t, ok := exists[id]; ok {
				seen++
				if t.After(last) {
					last = t
				}
			}
		}
		mu.Unlock()
		if seen == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d Kubernetes Jobs exist", seen, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	falconRate := float64(n) / last.Sub(start).Seconds()
	b.ReportMetric(falconRate, "falcon-jobs/s")
	b.ReportMetric(plainRate, "plain-jobs/s")
	b.ReportMetric(falconRate/plainRate, "falcon/plain")
	b.ReportMetric(float64(createMs.Load())/1000/float64(n), "api-create-ms")
	b.ReportMetric(float64(created.Sub(start).Milliseconds())/1000, "api-creates-s")
	if m, _ := scrape(b, base+"/metrics"); m["falcon_rm_cycles_total"] > 0 {
		b.ReportMetric(m["falcon_rm_cycles_total"], "rm-cycles")
		b.ReportMetric(1000*m["falcon_rm_cycle_seconds_sum"]/m["falcon_rm_cycles_total"], "rm-cycle-mean-ms")
	}
}

// creators is how many clients create the experiments at once.
const creators = 8

// submitConcurrency is the resource manager's submissions in flight per
// cluster (resourcemanager's submitPerCluster), which the plain baseline
// matches.
const submitConcurrency = 8
