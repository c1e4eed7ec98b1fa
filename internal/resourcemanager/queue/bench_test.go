package queue_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// jobs returns n jobs from actors actors, created one second apart, each
// job's actor drawn at random (fixed seed) so actors interleave unevenly.
func jobs(n, actors int) []queue.Job {
	rng := rand.New(rand.NewPCG(7, 7))
	names := make([]string, actors)
	for i := range names {
		names[i] = fmt.Sprintf("user-%04d", i)
	}
	js := make([]queue.Job, n)
	for i := range js {
		js[i] = queue.Job{
			ID:              fmt.Sprintf("job-%07d", i),
			Actor:           names[rng.IntN(actors)],
			Name:            fmt.Sprintf("train-%d", i),
			AcceleratorType: "v7x",
			Topology:        "2x2x4",
			Created:         t0.Add(time.Duration(i) * time.Second),
		}
	}
	return js
}

// reportCPU, deferred right after the timer starts, adds a cpu-ns/op metric:
// the process's CPU time per op, garbage collection included. On a shared
// machine ns/op also counts the time the benchmark waited for a core.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if start > 0 {
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

func loaded(b *testing.B, n, actors int) (*queue.Scheduler, []queue.Job) {
	s := queue.New()
	js := jobs(n, actors)
	add(b, s, k, js...)
	return s, js
}

// BenchmarkPick100kJobs1kActors is the steady state of a busy queue: one
// op is a Pick, the Release when its pods run, and a new job from the same
// actor joining the back, so the queue stays at 100k jobs.
func BenchmarkPick100kJobs1kActors(b *testing.B) {
	s, js := loaded(b, 100_000, 1_000)
	created := js[len(js)-1].Created
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	for range b.N {
		j, ok := s.Pick(k)
		if !ok {
			b.Fatal("Pick found nothing")
		}
		if err := s.Release(j.ID); err != nil {
			b.Fatal(err)
		}
		created = created.Add(time.Second)
		j.Created = created
		if err := s.Add(j, k); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRemoveWaiting100k aborts an arbitrary waiting job (and re-adds
// it, to keep the size constant).
func BenchmarkRemoveWaiting100k(b *testing.B) {
	s, js := loaded(b, 100_000, 1_000)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	for i := range b.N {
		j := js[(i*7919)%len(js)]
		if err := s.Remove(j.ID); err != nil {
			b.Fatal(err)
		}
		if err := s.Add(j, k); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPositions100k is one Waiting call for a queue of 100k jobs from
// 1k actors: "cold" recomputes the round-robin order (as after an Add or
// Remove), "cached" reuses it (as after picks only), "messages" adds
// formatting every job's Waiting message.
func BenchmarkPositions100k(b *testing.B) {
	s, _ := loaded(b, 100_000, 1_000)
	toggle := []string{"user-0001", "user-0002"}
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for i := range b.N {
			s.SetLastServed(k, toggle[i%2]) // invalidates the cached order
			if len(s.Waiting(k)) != 100_000 {
				b.Fatal("short")
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		s.Waiting(k)
		b.ReportAllocs()
		b.ResetTimer()
		defer reportCPU(b)()
		for range b.N {
			if len(s.Waiting(k)) != 100_000 {
				b.Fatal("short")
			}
		}
	})
	b.Run("cold+messages", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for i := range b.N {
			s.SetLastServed(k, toggle[i%2])
			for _, p := range s.Waiting(k) {
				_ = p.Message()
			}
		}
	})
}

// BenchmarkAdd adds jobs from 1k actors to one growing queue.
func BenchmarkAdd(b *testing.B) {
	js := jobs(b.N, 1_000)
	s := queue.New()
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	for _, j := range js {
		if err := s.Add(j, k); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSelect picks among 50 clusters for one job.
func BenchmarkSelect(b *testing.B) {
	s := queue.New()
	var clusters []queue.Cluster
	for i := range 50 {
		clusters = append(clusters, cl(fmt.Sprintf("c%02d", i), priority(i%3)))
		add(b, s, queue.Key{Cluster: clusters[i].Name, Topology: "2x2x4"}, job(fmt.Sprint("f", i), "filler", i))
	}
	j := job("new", "alice", 100)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	for range b.N {
		if _, err := s.Select(j, clusters); err != nil {
			b.Fatal(err)
		}
	}
}
