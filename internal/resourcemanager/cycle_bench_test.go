package resourcemanager_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/metrics"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// BenchmarkCycle10kLive: the resource manager's cycle with 10,000 live
// (Running) jobs, of which 10 change per iteration (a backend reports them
// with a new message, which the manager writes). It runs the real Run loop
// against a real API server; a cycle's cost is read from the manager's own
// histogram, so the benchmark's own waiting is not counted. The goal is
// 10 ms per cycle. FALCON_BENCH_LIVE sets the number of live jobs.
func BenchmarkCycle10kLive(b *testing.B) {
	live := 10000
	if v, err := strconv.Atoi(os.Getenv("FALCON_BENCH_LIVE")); err == nil && v > 0 {
		live = v
	}
	env := apitest.Start(b, map[string]string{"local": "test"})
	be := newScripted()
	reg := prometheus.NewRegistry()
	mgr := resourcemanager.New(env.Conn, resourcemanager.WithBackend("test", be),
		resourcemanager.WithMetrics(metrics.NewRM(reg)),
		resourcemanager.WithInterval(time.Hour), resourcemanager.WithResync(time.Hour))
	var jobs []string
	for i := range live {
		exp, err := env.Exps.CreateExp(context.Background(), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
			Name: fmt.Sprintf("live-%d", i), RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}})
		if err != nil {
			b.Fatal(err)
		}
		jobs = append(jobs, exp.GetJobs()[0].GetId())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Run(ctx) }()
	defer func() { cancel(); <-done }()
	running := func(id string) bool { return env.Job(b, id).GetStatus() == "Running" }
	for deadline := time.Now().Add(10 * time.Minute); !running(jobs[0]) || !running(jobs[live-1]); {
		if time.Now().After(deadline) {
			b.Fatal("jobs never ran")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// quiet waits for the echoes of the manager's own writes to settle: no
	// cycle for a while (a cycle reading 10,000 echoes takes a moment to
	// start, so the window is generous).
	quiet := func(window time.Duration) {
		for {
			c1, _ := histogram(b, reg, "falcon_rm_cycle_seconds")
			time.Sleep(window)
			if c2, _ := histogram(b, reg, "falcon_rm_cycle_seconds"); c1 == c2 {
				return
			}
		}
	}
	quiet(time.Second)
	c0, s0 := histogram(b, reg, "falcon_rm_cycle_seconds")
	_, j0 := histogram(b, reg, "falcon_rm_cycle_jobs")
	b.ResetTimer()
	for i := range b.N {
		ids := make([]string, 10)
		for k := range ids {
			ids[k] = jobs[(i*10+k)%live]
			be.set(ids[k], resourcemanager.PhaseRunning, fmt.Sprintf("1/1 running, report %d", i))
		}
		mgr.Touch(ids...)
		last := ids[9]
		want := fmt.Sprintf("1/1 running, report %d", i)
		for env.Job(b, last).GetMessage() != want {
			time.Sleep(time.Millisecond)
		}
		quiet(30 * time.Millisecond)
	}
	b.StopTimer()
	c1, s1 := histogram(b, reg, "falcon_rm_cycle_seconds")
	_, j1 := histogram(b, reg, "falcon_rm_cycle_jobs")
	cycles := float64(c1 - c0)
	b.ReportMetric(1000*(s1-s0)/cycles, "cycle-ms")
	b.ReportMetric((j1-j0)/cycles, "jobs-looked-at/cycle")
	b.ReportMetric(cycles/float64(b.N), "cycles/op")
	b.ReportMetric(float64(live), "live-jobs")
}
