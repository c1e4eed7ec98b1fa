package resourcemanager_test

// Fidelity of falcon sim: the same trace through the real API server and
// manager (the simulated day's harness) and through internal/sim must give
// every job the same pool: the same cluster, and a pool created for the
// same job (itself, or the one whose pool it reused).
//
//	go test -run 'TestSimFidelity|TestBundledDayTrace' -v ./internal/resourcemanager/

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/sim"
)

var updateDayTrace = flag.Bool("update-day-trace", false, "rewrite internal/sim/testdata/day.jsonl from the simulated day's generator")

var simDayT0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// simJobs is the harness's trace as falcon sim reads it.
func simJobs(trace []simTraceJob) []sim.Job {
	out := make([]sim.Job, len(trace))
	for i, tj := range trace {
		out[i] = sim.Job{T: simDayT0.Add(tj.at), User: tj.user, Accelerator: simAccel, Topology: tj.topology, Hosts: tj.hosts,
			Duration: tj.duration, PoolCreate: tj.createLatency}
	}
	return out
}

// simDayConfig is the harness's world: two v5p clusters whose pools come
// from a reservation with room, take two minutes to delete, and the
// manager's timing as the harness sets it.
func simDayConfig() sim.Config {
	cfg := sim.Config{Timing: simTiming}
	for _, n := range []string{simClusterA, simClusterB} {
		cfg.Clusters = append(cfg.Clusters, sim.Cluster{Name: n, Accelerators: map[string]int{simAccel: 1},
			ReservationNodes: 1 << 20, PoolDelete: simPoolDeleteTime, PoolCreateMin: 5 * time.Minute, PoolCreateMax: 10 * time.Minute})
	}
	return cfg
}

func TestSimFidelity(t *testing.T) {
	trace := simTrace(60, 6*time.Hour, simSeed)
	for _, policy := range []string{"spec", "per-job", "cap=2"} {
		t.Run(policy, func(t *testing.T) {
			p, err := sim.ParsePolicy(policy)
			if err != nil {
				t.Fatal(err)
			}
			real := runSimDayWith(t, trace, policy, p.ManagerOptions()...)
			got, err := sim.Simulate(simJobs(trace), simDayConfig(), p, 1)
			if err != nil {
				t.Fatal(err)
			}
			decisions := make([]string, len(got.Timeline))
			for i, r := range got.Timeline {
				decisions[i] = fmt.Sprintf("job %d: cluster %s, pool created for job %d", i, r.Cluster, r.PoolFor)
			}
			if diff := cmp.Diff(real.decisions, decisions); diff != "" {
				t.Errorf("pool decisions, manager (-) vs simulator (+):\n%s", diff)
			}
			if real.poolsCreated != got.PoolsCreated || real.reused != got.Reused {
				t.Errorf("manager created %d pools and reused %d times; simulator %d and %d", real.poolsCreated, real.reused, got.PoolsCreated, got.Reused)
			}
			t.Logf("%s: %d jobs, %d pools created, %d reuses; idle pool-min manager %.1f, simulator %.1f; mean wait %.1f / %.1f min",
				policy, len(trace), got.PoolsCreated, got.Reused, real.poolIdle.Minutes(), got.PoolIdle.Minutes(), real.meanWait().Minutes(), got.WaitMean.Minutes())
		})
	}
}

// TestBundledDayTrace checks that the trace falcon sim bundles is the
// simulated day's (BenchmarkSimulatedDay's 500 jobs), so the two report on
// the same traffic.
func TestBundledDayTrace(t *testing.T) {
	var want bytes.Buffer
	if err := sim.WriteTrace(&want, simJobs(simTrace(500, 24*time.Hour, simSeed))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "sim", "testdata", "day.jsonl")
	if *updateDayTrace {
		if err := os.WriteFile(path, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with -update-day-trace)", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("%s differs from the simulated day's trace; rewrite it with go test -run TestBundledDayTrace ./internal/resourcemanager/ -update-day-trace", path)
	}
}
