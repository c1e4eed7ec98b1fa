package resourcemanager_test

// The simulated day: one deterministic trace of TPU jobs, run through the
// real resource manager against a real API server, once with Falcon's pool
// reuse and once with the naive policy (a pool per job), in virtual time.
// The simulated GKE (simday_backend_test.go) is strict, so the run is also
// a correctness check of the pool logic under load.
//
//	go test -run TestSimulatedDayReuse -v ./internal/resourcemanager/
//	go test -run '^$' -bench BenchmarkSimulatedDay -benchtime 1x ./internal/resourcemanager/

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/sim"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// ---------------------------------------------------------------- trace

// simTraceJob is one job of the trace.
type simTraceJob struct {
	idx           int
	name          string // experiment name, unique in the trace
	user          string
	topology      string // v5p topology, lower case
	hosts         int
	at            time.Duration // submission, from the start of the day
	duration      time.Duration // how long it runs once dispatched
	createLatency time.Duration // how long its own pool takes to create, if it gets one
}

// simTopologies are v5p slices of 1, 2 and 4 hosts (4 chips a host).
var simTopologies = []struct {
	topo  string
	hosts int
}{{"2x2x1", 1}, {"2x2x2", 2}, {"2x2x4", 4}}

// simUserMix are the team: how often each starts a session (weight) and
// the topology they work on most.
var simUserMix = []struct {
	name   string
	weight int
	fav    int // index in simTopologies
}{
	{"ana", 3, 0}, {"ben", 2, 1}, {"chen", 2, 2}, {"dana", 1, 0}, {"eli", 1, 1}, {"fay", 1, 2},
}

const (
	simSeed      = 20260105
	simClusterA  = "v5p-east"
	simClusterB  = "v5p-west"
	simAccel     = "v5p"
	simMaxCycles = 50 // Reconcile calls at one instant before we call it a livelock
)

// simTrace generates n jobs arriving over span: users work in sessions of
// 3-8 jobs of one topology submitted a few minutes apart (70% of sessions
// on their usual topology); jobs run 5-90 minutes, short ones more often;
// a pool takes 5-10 minutes to create. The same seed gives the same trace.
func simTrace(n int, span time.Duration, seed uint64) []simTraceJob {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	totalWeight := 0
	for _, u := range simUserMix {
		totalWeight += u.weight
	}
	var jobs []simTraceJob
	for len(jobs) < n {
		w := rng.IntN(totalWeight)
		ui := 0
		for w >= simUserMix[ui].weight {
			w -= simUserMix[ui].weight
			ui++
		}
		u := simUserMix[ui]
		topo := u.fav
		if rng.Float64() >= 0.7 {
			topo = rng.IntN(len(simTopologies))
		}
		at := time.Duration(rng.Int64N(int64((span-time.Hour)/time.Second))) * time.Second
		size := 3 + rng.IntN(6)
		for k := 0; k < size && len(jobs) < n; k++ {
			u2 := rng.Float64()
			jobs = append(jobs, simTraceJob{
				user: u.name, topology: simTopologies[topo].topo, hosts: simTopologies[topo].hosts, at: at,
				duration:      time.Duration(300+int(u2*u2*5100)) * time.Second,
				createLatency: time.Duration(300+rng.IntN(301)) * time.Second,
			})
			at += time.Duration(20+rng.IntN(280)) * time.Second
		}
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].at < jobs[b].at })
	for i := range jobs {
		// Distinct submission times, so the queues' order never falls back
		// to the (random) job IDs.
		if i > 0 && jobs[i].at <= jobs[i-1].at {
			jobs[i].at = jobs[i-1].at + time.Second
		}
		jobs[i].idx = i
		jobs[i].name = fmt.Sprintf("%s-%03d", jobs[i].user, i)
	}
	return jobs
}

// ---------------------------------------------------------------- plumbing

// simUsersAuth names the caller from an x-user header, so the trace's
// users are distinct actors to the scheduler.
type simUsersAuth struct{}

func (simUsersAuth) Authenticate(_ context.Context, md map[string][]string) (auth.Principal, error) {
	u := "anonymous"
	if v := md["x-user"]; len(v) > 0 {
		u = v[0]
	}
	return auth.Principal{UserID: "sim:" + u, Email: u + "@example.com", Kind: auth.KindUser}, nil
}

// countingConn is the manager's connection, counting its writes (a cycle
// that writes nothing and changes nothing on the cluster is quiescent) and
// the jobs it has ended.
type countingConn struct {
	grpc.ClientConnInterface
	writes atomic.Int64
	mu     sync.Mutex
	ended  map[string]string // job ID -> terminal status
}

func (c *countingConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	err := c.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
	switch method {
	case falconv1.JobService_UpdateJobStatus_FullMethodName:
		c.writes.Add(1)
		req := args.(*falconv1.UpdateJobStatusRequest)
		if err == nil && lifecycle.JobMachine.IsTerminal(lifecycle.Status(req.GetStatus())) {
			c.mu.Lock()
			c.ended[req.GetId()] = req.GetStatus()
			c.mu.Unlock()
		}
	case falconv1.JobService_UpdateJobStatuses_FullMethodName:
		// Batches carry queue positions (not progress: a cycle that only
		// rewrites them is quiescent) and the updates of Running jobs.
		if err != nil {
			break
		}
		for _, r := range reply.(*falconv1.UpdateJobStatusesResponse).GetResults() {
			j := r.GetJob()
			if j == nil || j.GetStatus() == string(lifecycle.Pending) {
				continue
			}
			c.writes.Add(1)
			if lifecycle.JobMachine.IsTerminal(lifecycle.Status(j.GetStatus())) {
				c.mu.Lock()
				c.ended[j.GetId()] = j.GetStatus()
				c.mu.Unlock()
			}
		}
	case falconv1.JobService_AppendJobMessage_FullMethodName, falconv1.JobService_AbortJob_FullMethodName:
		c.writes.Add(1)
	}
	return err
}

func (c *countingConn) endedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ended)
}

// simLog keeps the manager's warnings: a healthy run has none worth reading.
type simLog struct {
	mu      sync.Mutex
	n       int
	samples []string
}

func (h *simLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *simLog) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *simLog) WithGroup(string) slog.Handler                { return h }
func (h *simLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	if len(h.samples) < 5 {
		var b strings.Builder
		b.WriteString(r.Time.Format("15:04:05 ") + r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		h.samples = append(h.samples, b.String())
	}
	return nil
}

// ---------------------------------------------------------------- the run

// simTiming is GKE-like pool timing. ListEvery is not 0: with 0 every
// cycle lists again and returns now as its next deadline, which hides the
// real ones (pool polls, delete retries) that the driver must step to.
var simTiming = resourcemanager.PoolTiming{
	ListEvery:   30 * time.Second,
	PollInitial: 30 * time.Second, PollMax: time.Minute,
	Grace:          10 * time.Minute,
	DeleteAttempts: 5, DeleteBackoffInitial: 30 * time.Second, DeleteBackoffMax: 5 * time.Minute,
	ReportEvery: time.Hour,
}

// simResult is what one policy did with the trace.
type simResult struct {
	policy       string
	jobs         int
	poolsCreated int
	reused       int // jobs dispatched onto a pool created for another job
	peakPools    int
	poolTotal    time.Duration // sum over pools of creation request to gone
	poolIdle     time.Duration // sum over pools of ready, not deleting, no job running:
	idleFirst    time.Duration // from ready to its first job's dispatch
	idleBetween  time.Duration // between two jobs (kept for a waiting job)
	idleLast     time.Duration // after its last job, until deletion
	poolBusy     time.Duration // sum of job run time
	waits        map[string][]time.Duration
	all          []time.Duration
	makespan     time.Duration // first submission to last job end
	lastGone     time.Duration // first submission to last pool gone
	steps        int
	reconciles   int
	pastDeadline int // quiescent cycles that returned a deadline not after now
	busyDenied   int
	warnings     int
	warnSamples  []string
	wall         time.Duration
	// decisions are, by trace index, the cluster each job ran on and the
	// trace index of the job its pool was created for (itself unless the
	// pool was reused): what the simulator must reproduce (simfidelity_test.go).
	decisions []string
}

// The day's figures are computed as falcon sim computes them, so the two
// can be compared.
func (r *simResult) meanWait() time.Duration { return sim.Mean(r.all) }

// runSimDay runs trace through a fresh API server and manager with one
// policy, stepping virtual time, and checks every job succeeded.
func runSimDay(tb testing.TB, trace []simTraceJob, reuse bool) *simResult {
	tb.Helper()
	if !reuse {
		return runSimDayWith(tb, trace, "naive", resourcemanager.WithoutPoolReuse())
	}
	return runSimDayWith(tb, trace, "reuse")
}

// runSimDayWith runs the day with the manager configured by policyOpts,
// named name in the results.
func runSimDayWith(tb testing.TB, trace []simTraceJob, name string, policyOpts ...resourcemanager.Option) *simResult {
	tb.Helper()
	wallStart := time.Now()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	clk := &simClock{}
	clk.Set(t0)
	quiet := slog.New(slog.DiscardHandler)

	st, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(filepath.Join(tb.TempDir(), "falcon.db")),
		sqlstore.WithClock(clk.Now), sqlstore.WithLogger(quiet))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	env := apitest.StartWith(tb, apitest.Options{Store: st, Server: []apiserver.Option{
		apiserver.WithClock(clk.Now), apiserver.WithAuthenticator(simUsersAuth{}), apiserver.WithLogger(quiet),
	}})
	// Registered in the store, as an admin's cluster file would: GKE
	// clusters are not a controller's to register through the API.
	for _, name := range []string{simClusterA, simClusterB} {
		if _, err := st.UpsertCluster(ctx, &store.Cluster{
			ID: ids.New(ids.Cluster), Name: name, Backend: "gke", Project: "falcon-sim", Location: "us-east5",
			Status: store.ClusterActive, CreatedAt: clk.Now(),
			Spec: store.ClusterSpec{GKECluster: name, Accelerators: []store.AcceleratorSlot{{Type: simAccel, Priority: 1}}},
		}); err != nil {
			tb.Fatalf("register cluster %s: %v", name, err)
		}
	}

	sim := newSimBackend(clk, trace)
	conn := &countingConn{ClientConnInterface: env.Conn, ended: map[string]string{}}
	logs := &simLog{}
	opts := []resourcemanager.Option{
		resourcemanager.WithBackend("gke", sim), resourcemanager.WithClock(clk.Now),
		resourcemanager.WithPoolTiming(simTiming), resourcemanager.WithLogger(slog.New(logs)),
	}
	opts = append(opts, policyOpts...)
	mgr := resourcemanager.New(conn, opts...)
	res := &simResult{policy: name, jobs: len(trace), waits: map[string][]time.Duration{}}

	submit := func(tj *simTraceJob) {
		uctx := metadata.AppendToOutgoingContext(ctx, "x-user", tj.user)
		exp, err := env.Exps.CreateExp(uctx, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
			Name: tj.name, Config: "sim",
			RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {
				Image: "python:3.12", Command: "python train.py", Replica: int32(tj.hosts), DeviceType: simAccel, DeviceTopo: tj.topology,
			}},
		}})
		if err != nil {
			tb.Fatalf("create %s: %v", tj.name, err)
		}
		if len(exp.GetJobs()) != 1 {
			tb.Fatalf("create %s: %d jobs", tj.name, len(exp.GetJobs()))
		}
	}

	now, next := t0, 0
	for {
		res.steps++
		for next < len(trace) && !t0.Add(trace[next].at).After(now) {
			submit(&trace[next])
			next++
		}
		var deadline time.Time
		for i := 0; ; i++ {
			if i == simMaxCycles {
				tb.Fatalf("%s: at %s the manager still acts after %d cycles (livelock?)", name, now.Format("15:04:05"), i)
			}
			w0, m0 := conn.writes.Load(), sim.Mutations()
			d, err := mgr.Reconcile(ctx)
			res.reconciles++
			if err != nil {
				tb.Fatalf("%s: reconcile at %s: %v", name, now.Format("15:04:05"), err)
			}
			if v := sim.Violations(); len(v) > 0 {
				tb.Fatalf("%s: the manager broke the cluster's rules:\n  %s", name, strings.Join(v, "\n  "))
			}
			if d.After(now) && (deadline.IsZero() || d.Before(deadline)) {
				deadline = d
			}
			if conn.writes.Load() == w0 && sim.Mutations() == m0 {
				if !d.IsZero() && !d.After(now) {
					res.pastDeadline++
				}
				break
			}
		}
		if next == len(trace) && conn.endedCount() == len(trace) && sim.livePools(now) == 0 {
			break
		}
		step := sim.nextEvent(now)
		for _, t := range []time.Time{deadline, arrival(t0, trace, next)} {
			if !t.IsZero() && (step.IsZero() || t.Before(step)) {
				step = t
			}
		}
		if step.IsZero() || step.Sub(t0) > 72*time.Hour {
			tb.Fatalf("%s: stuck at %s: %d/%d jobs ended, %d pools alive, %d jobs running, next event %v",
				name, now.Format("Jan 2 15:04:05"), conn.endedCount(), len(trace), sim.livePools(now), sim.runningJobs(now), step)
		}
		now = step
		clk.Set(now)
	}

	// Every job must have succeeded, and started when the cluster says it
	// was dispatched.
	byName := map[string]*falconv1.Job{}
	for token := ""; ; {
		resp, err := env.Jobs.ListJobs(ctx, &falconv1.ListJobsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			tb.Fatal(err)
		}
		for _, j := range resp.GetItems() {
			byName[j.GetExpName()] = j
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	sim.mu.Lock()
	defer sim.mu.Unlock()
	var bad []string
	for i := range trace {
		tj := &trace[i]
		j := byName[tj.name]
		switch {
		case j == nil:
			bad = append(bad, tj.name+": missing")
			continue
		case j.GetStatus() != string(lifecycle.Succeeded):
			bad = append(bad, fmt.Sprintf("%s: %s/%s %q", tj.name, j.GetStatus(), j.GetReason(), j.GetMessage()))
			continue
		}
		r := sim.runs[j.GetId()]
		if r == nil {
			bad = append(bad, tj.name+": succeeded but never dispatched")
			continue
		}
		if got := j.GetStartedAt().AsTime(); !got.Equal(r.start.Truncate(time.Microsecond)) {
			bad = append(bad, fmt.Sprintf("%s: started_at %s, dispatched at %s", tj.name, got.Format("15:04:05"), r.start.Format("15:04:05")))
		}
		if j.GetNodePool() != r.pool {
			bad = append(bad, fmt.Sprintf("%s: node_pool %q, ran on %q", tj.name, j.GetNodePool(), r.pool))
		}
		w := r.start.Sub(t0.Add(tj.at))
		res.waits[tj.user] = append(res.waits[tj.user], w)
		res.all = append(res.all, w)
		res.makespan = max(res.makespan, r.end.Sub(t0.Add(trace[0].at)))
	}
	if len(bad) > 0 {
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("... and %d more", len(bad)-10))
		}
		tb.Fatalf("%s: %d of %d jobs did not end as they should:\n  %s", name, len(bad), len(trace), strings.Join(bad, "\n  "))
	}

	res.decisions = make([]string, len(trace))
	for i := range trace {
		r := sim.runs[byName[trace[i].name].GetId()]
		creator := -1
		if p := sim.pools[r.cluster][r.pool]; p != nil {
			for k := range trace {
				if byName[trace[k].name].GetId() == p.createdFor {
					creator = k
				}
			}
		}
		res.decisions[i] = fmt.Sprintf("job %d: cluster %s, pool created for job %d", i, r.cluster, creator)
	}
	type edge struct {
		t time.Time
		d int
	}
	var edges []edge
	for _, p := range sim.allPools {
		res.poolsCreated++
		res.poolTotal += p.goneAt.Sub(p.requested)
		res.lastGone = max(res.lastGone, p.goneAt.Sub(t0.Add(trace[0].at)))
		edges = append(edges, edge{p.requested, 1}, edge{p.goneAt, -1})
		// Runs on a pool never overlap and lie between ready and deleting
		// (the backend enforces both), so the gaps are the idle time.
		idleFrom := p.readyAt
		for i, r := range p.runs {
			res.poolBusy += r.end.Sub(r.start)
			if r.jobID != p.createdFor {
				res.reused++
			}
			if i == 0 {
				res.idleFirst += r.start.Sub(idleFrom)
			} else {
				res.idleBetween += r.start.Sub(idleFrom)
			}
			idleFrom = r.end
		}
		if p.deletingAt.After(idleFrom) {
			res.idleLast += p.deletingAt.Sub(idleFrom)
		}
	}
	sort.Slice(edges, func(a, b int) bool {
		if !edges[a].t.Equal(edges[b].t) {
			return edges[a].t.Before(edges[b].t)
		}
		return edges[a].d < edges[b].d
	})
	for n, i := 0, 0; i < len(edges); i++ {
		n += edges[i].d
		res.peakPools = max(res.peakPools, n)
	}
	res.poolIdle = res.idleFirst + res.idleBetween + res.idleLast
	res.busyDenied = sim.busyDenied
	if sim.stops > 0 {
		tb.Fatalf("%s: the manager stopped %d jobs; none should have been", name, sim.stops)
	}
	logs.mu.Lock()
	res.warnings, res.warnSamples = logs.n, slices.Clone(logs.samples)
	logs.mu.Unlock()
	res.wall = time.Since(wallStart)
	return res
}

// arrival is when trace[next] is submitted; zero once all are.
func arrival(t0 time.Time, trace []simTraceJob, next int) time.Time {
	if next >= len(trace) {
		return time.Time{}
	}
	return t0.Add(trace[next].at)
}

// ---------------------------------------------------------------- report

func minutes(d time.Duration) string { return fmt.Sprintf("%.1f", d.Minutes()) }

// simTable renders the results side by side, then waits per user.
func simTable(trace []simTraceJob, rs ...*simResult) string {
	var b strings.Builder
	row := func(label string, f func(r *simResult) string) {
		fmt.Fprintf(&b, "%-28s", label)
		for _, r := range rs {
			fmt.Fprintf(&b, "%12s", f(r))
		}
		b.WriteString("\n")
	}
	users := map[string]int{}
	topos := map[string]int{}
	for _, tj := range trace {
		users[tj.user]++
		topos[tj.topology]++
	}
	fmt.Fprintf(&b, "\nsimulated day: %d jobs from %d users, v5p %v, 2 clusters, last arrival at %s\n\n",
		len(trace), len(users), topos, trace[len(trace)-1].at.Round(time.Minute))
	row("policy", func(r *simResult) string { return r.policy })
	row("pools created", func(r *simResult) string { return fmt.Sprint(r.poolsCreated) })
	row("jobs on a reused pool", func(r *simResult) string { return fmt.Sprint(r.reused) })
	row("peak pools alive", func(r *simResult) string { return fmt.Sprint(r.peakPools) })
	row("pool-minutes total", func(r *simResult) string { return minutes(r.poolTotal) })
	row("pool-minutes busy (jobs)", func(r *simResult) string { return minutes(r.poolBusy) })
	row("pool-minutes idle (ready)", func(r *simResult) string { return minutes(r.poolIdle) })
	row("  ready, before 1st job", func(r *simResult) string { return minutes(r.idleFirst) })
	row("  kept between two jobs", func(r *simResult) string { return minutes(r.idleBetween) })
	row("  after last job", func(r *simResult) string { return minutes(r.idleLast) })
	row("wait mean (min)", func(r *simResult) string { return minutes(r.meanWait()) })
	row("wait p95 (min)", func(r *simResult) string { return minutes(sim.P95(r.all)) })
	row("wait max (min)", func(r *simResult) string { return minutes(slices.Max(r.all)) })
	row("makespan (h)", func(r *simResult) string { return fmt.Sprintf("%.2f", r.makespan.Hours()) })
	row("last pool gone (h)", func(r *simResult) string { return fmt.Sprintf("%.2f", r.lastGone.Hours()) })
	row("steps / Reconcile calls", func(r *simResult) string { return fmt.Sprintf("%d/%d", r.steps, r.reconciles) })
	row("deadlines not after now", func(r *simResult) string { return fmt.Sprint(r.pastDeadline) })
	row("deletes refused (busy)", func(r *simResult) string { return fmt.Sprint(r.busyDenied) })
	row("manager warnings", func(r *simResult) string { return fmt.Sprint(r.warnings) })
	row("wall time (s)", func(r *simResult) string { return fmt.Sprintf("%.1f", r.wall.Seconds()) })
	b.WriteString("\nwait per user, minutes (mean / p95)\n")
	fmt.Fprintf(&b, "%-28s", "user (jobs)")
	for _, r := range rs {
		fmt.Fprintf(&b, "%16s", r.policy)
	}
	b.WriteString("\n")
	for _, u := range simUserMix {
		fmt.Fprintf(&b, "%-28s", fmt.Sprintf("%s (%d)", u.name, users[u.name]))
		for _, r := range rs {
			fmt.Fprintf(&b, "%16s", minutes(sim.Mean(r.waits[u.name]))+" / "+minutes(sim.P95(r.waits[u.name])))
		}
		b.WriteString("\n")
	}
	for _, r := range rs {
		for _, w := range r.warnSamples {
			fmt.Fprintf(&b, "%s warning: %s\n", r.policy, w)
		}
	}
	return b.String()
}

// ---------------------------------------------------------------- test and benchmark

// TestSimulatedDayReuse runs a quarter of a day (120 jobs) under both
// policies: reuse must create strictly fewer pools without making jobs
// wait longer on average, and every job must succeed.
func TestSimulatedDayReuse(t *testing.T) {
	trace := simTrace(120, 6*time.Hour, simSeed)
	reuse := runSimDay(t, trace, true)
	naive := runSimDay(t, trace, false)
	t.Log(simTable(trace, reuse, naive))
	if reuse.poolsCreated >= naive.poolsCreated {
		t.Errorf("reuse created %d pools, naive %d: reuse should create fewer", reuse.poolsCreated, naive.poolsCreated)
	}
	if naive.poolsCreated != len(trace) || naive.reused != 0 {
		t.Errorf("naive created %d pools for %d jobs and reused %d: want one pool per job", naive.poolsCreated, len(trace), naive.reused)
	}
	for _, r := range []*simResult{reuse, naive} {
		if r.pastDeadline > 0 {
			t.Errorf("%s: %d quiescent cycles returned a deadline not after now: Run would spin", r.policy, r.pastDeadline)
		}
	}
	if reuse.meanWait() > naive.meanWait() {
		t.Errorf("mean wait with reuse %s, naive %s: reuse should not be worse", reuse.meanWait(), naive.meanWait())
	}
}

// BenchmarkSimulatedDay runs the full day (500 jobs) under each policy and
// reports pools created, idle pool-minutes and waits.
func BenchmarkSimulatedDay(b *testing.B) {
	trace := simTrace(500, 24*time.Hour, simSeed)
	results := map[string]*simResult{}
	for _, reuse := range []bool{true, false} {
		name := "reuse"
		if !reuse {
			name = "naive"
		}
		b.Run(name, func(b *testing.B) {
			var r *simResult
			for range b.N {
				r = runSimDay(b, trace, reuse)
			}
			b.ReportMetric(float64(r.poolsCreated), "pools-created")
			b.ReportMetric(r.poolIdle.Minutes(), "idle-pool-min")
			b.ReportMetric(r.poolTotal.Minutes(), "total-pool-min")
			b.ReportMetric(r.meanWait().Minutes(), "mean-wait-min")
			b.ReportMetric(sim.P95(r.all).Minutes(), "p95-wait-min")
			b.ReportMetric(r.makespan.Hours(), "makespan-h")
			b.ReportMetric(float64(r.reconciles), "reconciles")
			results[name] = r
		})
	}
	if results["reuse"] != nil && results["naive"] != nil {
		b.Log(simTable(trace, results["reuse"], results["naive"]))
	}
}
