package sim

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"
)

// timelineDigest is a digest of every job's timeline in r: which cluster
// and pool it got, whose pool that was, and when it was picked, started
// and ended, so that any change of decision changes it.
func timelineDigest(r *Result) string {
	h := sha256.New()
	for _, j := range r.Timeline {
		fmt.Fprintf(h, "%d %s %s %t %d %d %d %d %d\n", j.Index, j.Cluster, j.Pool, j.CreatedPool, j.PoolFor,
			j.Picked.Unix(), j.Started.Unix(), j.Ended.Unix(), j.Wait)
	}
	return fmt.Sprintf("%x pools=%d reused=%d idle=%s cycles=%d instants=%d", h.Sum(nil)[:8], r.PoolsCreated, r.Reused, r.PoolIdle, r.Cycles, r.Instants)
}

// TestDecisionsUnchanged holds the simulator's decisions on fixed traces
// to the digests they had before its speed work: making it faster must
// not change what it decides (nor how many cycles it runs). The two linger
// rows changed once since, on purpose: selection now finds a cluster's
// idle pools by the job's pool shape (queue.Job.Shape), where it had
// looked them up by the queue key and never found one.
func TestDecisionsUnchanged(t *testing.T) {
	day := dayTrace(t)
	shapes, _ := ParseShapes("v5p:2x2x1,v5p:2x2x2,v5p:2x2x4")
	gen, err := Generate(GenOptions{Users: 8, Jobs: 3000, Shapes: shapes, Burstiness: 0.7, Start: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC),
		Span: 6 * 24 * time.Hour, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A world with scarce reservations, stockouts and a bounded queue,
	// so that flex-start, deletion retries and refusals all happen.
	scarce := DefaultConfig(gen)
	for i := range scarce.Clusters {
		scarce.Clusters[i].ReservationNodes = 16
		scarce.Clusters[i].Stockout = 0.2
		scarce.Clusters[i].MaxQueueDepth = 40
	}
	cases := []struct {
		name   string
		trace  []Job
		cfg    Config
		policy string
		want   string
	}{
		{"day spec", day, DefaultConfig(day), "spec", "b26aceb10f772292 pools=377 reused=226 idle=3h13m43s cycles=7480 instants=6340"},
		{"day per-job", day, DefaultConfig(day), "per-job", "62d2426976cdf0c1 pools=500 reused=0 idle=4h13m45s cycles=8841 instants=7719"},
		{"day linger=20m", day, DefaultConfig(day), "linger=20m", "6dfde50f18e66a46 pools=250 reused=362 idle=101h26m20s cycles=6038 instants=4664"},
		{"day priority", day, DefaultConfig(day), "priority", "0d18363c6ed796b6 pools=266 reused=379 idle=1h59m12s cycles=6182 instants=5142"},
		{"day priority+linger=20m", day, DefaultConfig(day), "priority+linger=20m", "87f89413d79c2861 pools=198 reused=429 idle=80h23m48s cycles=5428 instants=4180"},
		{"day priority+cap=8", day, DefaultConfig(day), "priority+cap=8", "be5fe0662287a953 pools=190 reused=392 idle=1h26m21s cycles=4958 instants=3919"},
		{"generated spec", gen, DefaultConfig(gen), "spec", "1770e592fa509fa6 pools=2048 reused=1650 idle=15h34m24s cycles=42081 instants=35471"},
		{"generated linger=10m", gen, DefaultConfig(gen), "linger=10m", "619e104c6cd98b75 pools=1653 reused=2111 idle=302h33m54s cycles=39331 instants=31024"},
		{"generated scarce spec", gen, scarce, "spec", "8f97af3d0fe7030f pools=1936 reused=1731 idle=15h16m26s cycles=43833 instants=37282"},
		{"generated scarce priority+linger=5m", gen, scarce, "priority+linger=5m", "6f2a187c2ab7ed7c pools=1162 reused=2586 idle=103h43m42s cycles=42676 instants=35285"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Simulate(tc.trace, tc.cfg, p, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := timelineDigest(r); got != tc.want {
				t.Errorf("decisions changed:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestBundledDayMeetsThePoolGoals holds the pool goals of falcon sim's
// purpose on the bundled day, for the policy that meets them all
// (priority+cap=8): pool creations at most 40% of per-job's, idle
// pool-minutes at most 5% of busy ones, Jain's index of the users' mean
// waits at least 0.95, and no user's p95 wait over twice the median
// user's. The simulation runs in virtual time: these are its decisions,
// not timings.
func TestBundledDayMeetsThePoolGoals(t *testing.T) {
	day := dayTrace(t)
	run := func(policy string) *Result {
		p, err := ParsePolicy(policy)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Simulate(day, DefaultConfig(day), p, 1)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	perJob, best := run("per-job"), run("priority+cap=8")
	if got, limit := best.PoolsCreated, perJob.PoolsCreated*40/100; got > limit {
		t.Errorf("%d pools created, over 40%% of per-job's %d (%d)", got, perJob.PoolsCreated, limit)
	}
	if idle, busy := best.PoolIdle, best.PoolBusy; idle*20 > busy {
		t.Errorf("idle %s is over 5%% of busy %s", idle, busy)
	}
	if best.Jain < 0.95 {
		t.Errorf("Jain's index of the users' mean waits %.3f, want at least 0.95", best.Jain)
	}
	if best.WorstP95OverMedian > 2 {
		t.Errorf("worst user's p95 wait is %.2f times the median user's, want at most 2", best.WorstP95OverMedian)
	}
}
