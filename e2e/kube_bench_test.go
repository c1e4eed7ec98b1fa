package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// BenchmarkKubeDispatch measures Falcon against three real edge clusters:
// experiments created -> Kubernetes Jobs existing (throughput, p50/p99), and
// Job complete -> experiment Succeeded visible through the API (p50/p99),
// next to plain client-go Job creates against the same apiservers.
// FALCON_BENCH_EXPS sets the number of experiments (default 1000).
func BenchmarkKubeDispatch(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("FALCON_BENCH_EXPS")); err == nil && v > 0 {
		n = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var edges []*kubeenv.Cluster
	for i := 0; i < 3; i++ {
		c := kubeenv.Start(b)
		if _, err := c.CreateNamespace(ctx, kubeNamespace); err != nil {
			b.Fatal(err)
		}
		capacity := corev1.ResourceList{"google.com/tpu": resource.MustParse("4000"), corev1.ResourceCPU: resource.MustParse("100000"),
			corev1.ResourceMemory: resource.MustParse("100000Gi"), corev1.ResourcePods: resource.MustParse("5000")}
		if _, err := c.AddNodes(ctx, 1, map[string]string{
			"cloud.google.com/gke-tpu-accelerator": "tpu7x", "cloud.google.com/gke-tpu-topology": "2x2x1",
		}, []corev1.Taint{{Key: "google.com/tpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}, capacity); err != nil {
			b.Fatal(err)
		}
		edges = append(edges, c)
	}

	// Baseline: plain client-go creates, one writer per apiserver.
	base := time.Now()
	var wg sync.WaitGroup
	for i, c := range edges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs := c.Clientset()
			for k := i; k < n; k += len(edges) {
				job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("baseline-%d", k)},
					Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						NodeSelector:  map[string]string{"no-such-node": "true"}, // never scheduled: creates only
						Containers:    []corev1.Container{{Name: "c", Image: "x"}}}}}}
				if _, err := cs.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	baseline := float64(n) / time.Since(base).Seconds()

	// Record when each Falcon job's Kubernetes Job appears and completes.
	var mu sync.Mutex
	exists, complete := map[string]time.Time{}, map[string]time.Time{}
	for _, c := range edges {
		f := informers.NewSharedInformerFactoryWithOptions(c.Clientset(), 0, informers.WithNamespace(kubeNamespace))
		inf := f.Batch().V1().Jobs().Informer()
		note := func(obj any) {
			j, ok := obj.(*batchv1.Job)
			if !ok {
				return
			}
			id := j.Labels["falcon.dev/job-id"]
			mu.Lock()
			defer mu.Unlock()
			if _, seen := exists[id]; !seen {
				exists[id] = time.Now()
			}
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
					if _, seen := complete[id]; !seen {
						complete[id] = time.Now()
					}
				}
			}
		}
		inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, o any) { note(o) }})
		f.Start(ctx.Done())
	}

	d := startDev(b, "")
	applyClusters(b, d, edges...)
	base0 := "http://" + d.http
	b.ResetTimer()
	created := map[string]time.Time{} // job ID -> create returned
	expOfJob := map[string]string{}
	start := time.Now()
	for i := 0; i < n; i++ {
		body := fmt.Sprintf(`{"experiment":{"name":"bench-%d","role_to_task_spec":{"main":{"replica":1,"image":"falcon.test/x",
			"device_type":"v7x","device_topo":"2x2x1","command":"true","envs":{"FALCON_TEST_DURATION":"1s"}}}}}`, i)
		resp, err := http.Post(base0+"/v1/experiments", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var exp struct {
			ID   string `json:"id"`
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		json.NewDecoder(resp.Body).Decode(&exp)
		resp.Body.Close()
		if len(exp.Jobs) != 1 {
			b.Fatalf("create %d: %v", i, exp)
		}
		created[exp.Jobs[0].ID] = time.Now()
		expOfJob[exp.Jobs[0].ID] = exp.ID
	}
	// Wait for every experiment to succeed, noting when each became visible.
	succeeded := map[string]time.Time{}
	deadline := time.Now().Add(time.Duration(n)*time.Second + 2*time.Minute)
	for len(succeeded) < n && time.Now().Before(deadline) {
		token := ""
		for {
			resp, err := http.Get(base0 + "/v1/experiments?status=Succeeded&page_size=1000&page_token=" + token)
			if err != nil {
				b.Fatal(err)
			}
			var page struct {
				Items []struct {
					ID string `json:"id"`
				} `json:"items"`
				Next string `json:"next_page_token"`
			}
			json.NewDecoder(resp.Body).Decode(&page)
			resp.Body.Close()
			now := time.Now()
			for _, it := range page.Items {
				if _, ok := succeeded[it.ID]; !ok {
					succeeded[it.ID] = now
				}
			}
			if token = page.Next; token == "" {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	if len(succeeded) < n {
		b.Fatalf("only %d of %d experiments succeeded", len(succeeded), n)
	}
	mu.Lock()
	defer mu.Unlock()
	var toExist, toVisible []float64
	var last time.Time
	for job, c := range created {
		e := exists[job]
		if e.After(last) {
			last = e
		}
		toExist = append(toExist, float64(e.Sub(c).Milliseconds()))
		if done, ok := complete[job]; ok {
			toVisible = append(toVisible, float64(succeeded[expOfJob[job]].Sub(done).Milliseconds()))
		}
	}
	b.ReportMetric(float64(n)/last.Sub(start).Seconds(), "falcon-jobs/s")
	b.ReportMetric(baseline, "client-go-jobs/s")
	b.ReportMetric(pct(toExist, 50), "create-to-job-p50-ms")
	b.ReportMetric(pct(toExist, 99), "create-to-job-p99-ms")
	if len(toVisible) > 0 {
		b.ReportMetric(pct(toVisible, 50), "complete-to-succeeded-p50-ms")
		b.ReportMetric(pct(toVisible, 99), "complete-to-succeeded-p99-ms")
	}
	// Where the controller's time went, from its own metrics.
	if m := scrape(b, base0+"/metrics"); m["falcon_rm_cycles_total"] > 0 {
		b.ReportMetric(m["falcon_rm_cycles_total"], "rm-cycles")
		b.ReportMetric(1000*m["falcon_rm_cycle_seconds_sum"]/m["falcon_rm_cycles_total"], "rm-cycle-mean-ms")
	}
}

// scrape reads the unlabelled samples of a Prometheus text exposition.
func scrape(b *testing.B, url string) map[string]float64 {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out
}
