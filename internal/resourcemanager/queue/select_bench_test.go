package queue_test

import (
	"fmt"
	"testing"

	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// fleet50 is 50 active clusters offering v7x with fresh probes, a fifth of
// them unreachable, depths and priorities spread so neither policy decides
// on the first cluster it reads.
func fleet50() []queue.Cluster {
	cs := make([]queue.Cluster, 50)
	for i := range cs {
		c := cl(fmt.Sprintf("edge-%02d", i), reg(1+i%7), maxDepth(8))
		if i%5 == 0 {
			down("probe timed out after 3s")(&c)
		} else {
			up(i % 9)(&c)
		}
		cs[i] = c
	}
	return cs
}

// BenchmarkSelect50Clusters is the selection cost per job, decision record
// included: one op places a new job on one of 50 clusters with fresh probes
// and removes it again, so every op selects among the same queues.
func BenchmarkSelect50Clusters(b *testing.B) {
	for _, p := range queue.Policies {
		b.Run(string(p), func(b *testing.B) {
			s := queue.New()
			clusters := fleet50()
			for i, c := range clusters { // Falcon's own queues: 0-3 jobs each
				for n := range i % 4 {
					add(b, s, queue.Key{Cluster: c.Name, Topology: "2x2x4"}, job(fmt.Sprintf("%s-%d", c.Name, n), "filler", n))
				}
			}
			j := job("new", "alice", 100)
			b.ReportAllocs()
			b.ResetTimer()
			defer reportCPU(b)()
			for b.Loop() {
				if _, sel, err := s.EnqueueExplained(j, clusters, p); err != nil || sel.Selected == "" {
					b.Fatal(sel.Reason, err)
				}
				if err := s.Remove(j.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
