package resourcemanager

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// BenchmarkPlan100kWaiting is the plan alone, without I/O, over 10^5
// waiting jobs from 1,000 users in 12 queues (3 clusters × 4 TPU shapes)
// with 4 pools per cluster:
//   - handover: the cycle after every queue's holder ran — each queue's
//     next job is picked (and, to keep the size steady, the holder's
//     successor rejoins the back), the positions of the 12 touched queues
//     are planned with the tail not due, and every cluster's pools;
//   - resync: every queue's every position planned with the tail due, as
//     on a full read.
//
// Both report ns/op and allocs/op (go test -benchmem).
func BenchmarkPlan100kWaiting(b *testing.B) {
	const n, users = 100_000, 1_000
	shapes := []string{"2x2x1", "2x2x2", "2x2x4", "4x4x4"}
	clusters := []string{"edge-a", "edge-b", "edge-c"}
	s := queue.New(queue.WithClock(func() time.Time { return t0 }))
	jobs := make(map[string]*falconv1.Job, n)
	written := make(map[string]int, n)
	var cands []queue.Cluster
	for _, c := range clusters {
		cands = append(cands, queue.Cluster{Name: c, Active: true, Accelerators: map[string]int{"v5p": 0}})
	}
	enqueue := func(i int) {
		id := fmt.Sprintf("job-%06d", i)
		sh := shapes[i%len(shapes)]
		qj := queue.Job{ID: id, Actor: fmt.Sprintf("user-%d", i%users), AcceleratorType: "v5p", Topology: "v5p:" + sh,
			PinnedCluster: clusters[(i/len(shapes))%len(clusters)], Created: t0.Add(time.Duration(i) * time.Millisecond)}
		if _, err := s.Enqueue(qj, cands); err != nil {
			b.Fatal(err)
		}
		jobs[id] = &falconv1.Job{Id: id, Status: string(lifecycle.Pending), Reason: string(lifecycle.ReasonWaiting),
			TaskSpec: &falconv1.TaskSpec{DeviceType: "v5p", DeviceTopo: sh}}
		written[id] = 0
	}
	for i := range n {
		enqueue(i)
	}
	var pools []Pool
	for i, sh := range shapes {
		pools = append(pools, Pool{Name: "p-" + sh, AcceleratorType: "v5p", Topology: sh, State: lifecycle.PoolReady, CreatedAt: t0.Add(-time.Duration(i) * time.Minute)})
	}
	demand := map[queue.Pool]int{}
	for _, sh := range shapes {
		demand[queue.Pool{AcceleratorType: "v5p", Topology: sh}] = n / len(shapes) / len(clusters)
	}
	planAllPools := func() int {
		kept := 0
		for range clusters {
			for _, d := range PlanPools(PoolFacts{Pools: pools, Owner: map[string]string{}, Demand: demand, Now: t0, Grace: time.Minute}) {
				if d.Verb == PoolKept {
					kept++
				}
			}
		}
		return kept
	}
	keys := s.Keys()
	if len(keys) != 12 {
		b.Fatalf("%d queues, want 12", len(keys))
	}

	// One buffer for every queue's positions, reused as the cycle reuses
	// Manager.waiting.
	var waiting []queue.Position
	// The setup's garbage is collected now, not charged to the first
	// sub-benchmark's cycles.
	runtime.GC()
	// The next job ID to enqueue, across runs (-count): an ID enqueued
	// again would be a no-op, and the queues would shrink instead.
	next := n
	b.Run("handover", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writes := 0
			for _, key := range s.Ready() {
				sj, ok := s.Pick(key)
				if !ok {
					b.Fatal("nothing to pick")
				}
				// Its pods ran: it leaves the queue and a new job joins.
				if err := s.Remove(sj.ID); err != nil {
					b.Fatal(err)
				}
				delete(jobs, sj.ID)
				delete(written, sj.ID)
				enqueue(next)
				next++
			}
			for _, key := range keys {
				waiting = s.AppendWaiting(waiting[:0], key)
				writes += len(planPositions(queueFacts{cluster: key.Cluster, waiting: waiting, jobs: jobs, written: written}))
			}
			if writes == 0 || planAllPools() == 0 {
				b.Fatal("the plan wrote nothing")
			}
		}
	})
	b.Run("resync", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writes := 0
			for _, key := range keys {
				waiting = s.AppendWaiting(waiting[:0], key)
				writes += len(planPositions(queueFacts{cluster: key.Cluster, waiting: waiting, jobs: jobs, written: written, refreshTail: true}))
			}
			if writes < n/2 || planAllPools() == 0 {
				b.Fatalf("the plan wrote %d positions", writes)
			}
		}
	})
}
