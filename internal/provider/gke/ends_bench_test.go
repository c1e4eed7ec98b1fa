package gke_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/falconhq/falcon/internal/provider/kube/render"
)

// BenchmarkPooledEnds measures how soon a slice job's end on a cluster
// whose node pools Falcon manages reaches its row: from the moment an
// informer on the cluster's pods has seen every pod of the job succeed to the
// moment the job reads Succeeded through the API (polled every 5ms). Jobs of three
// shapes run one second each, one at a time per shape (the queue rule),
// each after the first of its shape on the pool its predecessor left.
//
// FALCON_BENCH_POOLED_JOBS sets the number of jobs (default 24).
func BenchmarkPooledEnds(b *testing.B) {
	n := envInt(b, "FALCON_BENCH_POOLED_JOBS", 24)
	if n < 1 {
		b.Fatalf("FALCON_BENCH_POOLED_JOBS=%d: want at least 1", n)
	}
	var lat []float64
	for b.Loop() {
		lat = append(lat, pooledEnds(b, n)...)
	}
	slices.Sort(lat)
	b.ReportMetric(percentile(lat, 50), "complete-to-succeeded-p50-ms")
	b.ReportMetric(percentile(lat, 99), "complete-to-succeeded-p99-ms")
	b.ReportMetric(lat[len(lat)-1], "complete-to-succeeded-max-ms")
}

// TestPooledEndsBenchmarkRuns runs BenchmarkPooledEnds' measurement small,
// so that make test keeps it working: every job's end is measured, none
// before its pods were seen to succeed.
func TestPooledEndsBenchmarkRuns(t *testing.T) {
	t.Parallel()
	lat := pooledEnds(t, 3)
	if len(lat) != 3 {
		t.Fatalf("%d ends measured, want 3", len(lat))
	}
	for _, ms := range lat {
		if ms < 0 {
			t.Errorf("an end was seen %.1fms before the job's pods succeeded", -ms)
		}
	}
}

// pooledEnds runs n jobs, of three shapes in turn, and returns each one's
// time from its pods seen succeeded to its Succeeded read, in ms.
func pooledEnds(tb testing.TB, n int) []float64 {
	shapes := []struct {
		topo  string
		hosts int32
	}{{"2x2x1", 1}, {"2x2x2", 2}, {"2x2x4", 4}}
	f := newFixture(tb, setup{createLatency: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	completed := watchCompletions(tb, ctx, f.ns)
	ids, hosts := make([]string, n), map[string]int32{}
	for i := range ids {
		ts := task(time.Second)
		sh := shapes[i%len(shapes)]
		ts.DeviceTopo, ts.Replica = sh.topo, sh.hosts
		ids[i] = f.submit(ts)
		hosts[ids[i]] = sh.hosts
	}
	seen := map[string]time.Time{}
	deadline := time.Now().Add(time.Duration(n)*3*time.Second + time.Minute)
	for len(seen) < n && time.Now().Before(deadline) {
		for _, id := range ids {
			if _, ok := seen[id]; ok || completed.at(id, hosts[id]).IsZero() {
				continue
			}
			switch j := f.api.Job(tb, id); j.GetStatus() {
			case "Succeeded":
				seen[id] = time.Now()
			case "Failed", "Aborted":
				tb.Fatalf("job %s ended %s: %s", id, j.GetStatus(), j.GetMessage())
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(seen) < n {
		for _, id := range ids {
			if _, ok := seen[id]; !ok {
				j := f.api.Job(tb, id)
				tb.Logf("job %s: %s/%s %q; its pods seen succeed at %v", id, j.GetStatus(), j.GetReason(), j.GetMessage(), completed.at(id, hosts[id]))
			}
		}
		tb.Fatalf("%d of %d jobs seen Succeeded in time", len(seen), n)
	}
	lat := make([]float64, 0, n)
	for id, t := range seen {
		lat = append(lat, float64(t.Sub(completed.at(id, hosts[id])).Microseconds())/1000)
	}
	return lat
}

// completions records when an informer saw each Falcon job's pods succeed:
// a job is complete once as many have as it has hosts.
type completions struct {
	mu   sync.Mutex
	pods map[string]map[string]bool // Falcon job ID -> its pods seen Succeeded
	last map[string]time.Time       // Falcon job ID -> when the last of them was
}

// at is when the job's hosts had all been seen succeed; zero before.
func (c *completions) at(id string, hosts int32) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pods[id]) < int(hosts) {
		return time.Time{}
	}
	return c.last[id]
}

// watchCompletions follows the namespace's pods with an informer, as a
// controller would, until ctx ends.
func watchCompletions(tb testing.TB, ctx context.Context, ns string) *completions {
	tb.Helper()
	c := &completions{pods: map[string]map[string]bool{}, last: map[string]time.Time{}}
	seen := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Status.Phase != corev1.PodSucceeded {
			return
		}
		now := time.Now()
		id := p.Labels[render.LabelJobID]
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.pods[id] == nil {
			c.pods[id] = map[string]bool{}
		}
		if !c.pods[id][p.Name] {
			c.pods[id][p.Name] = true
			c.last[id] = now
		}
	}
	f := informers.NewSharedInformerFactoryWithOptions(shared.Clientset(), 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = render.LabelJobID }))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) },
	}); err != nil {
		tb.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		tb.Fatal("the pod watch did not sync")
	}
	return c
}

// percentile is the p-th percentile of sorted xs (nearest rank).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
