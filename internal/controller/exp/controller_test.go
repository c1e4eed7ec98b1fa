package exp_test

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	expctl "github.com/falconhq/falcon/internal/controller/exp"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// move writes a job's status straight to the store, which leaves its
// experiment as it was: the state the expController exists to repair (a
// write through the API server carries the experiment along, see
// moveAPI), and which it finds on a full read. No change reaches the feed.
func move(t *testing.T, env *apitest.Env, id, from, to, reason, msg string) {
	t.Helper()
	if _, err := env.Store.UpdateJobStatus(context.Background(), store.StatusUpdate{
		ID: id, Expected: lifecycle.Status(from), Status: lifecycle.Status(to), Reason: reason, Message: msg}); err != nil {
		t.Fatal(err)
	}
}

// moveAPI writes a job's status as the resource manager does: the API
// server brings the experiment along in the same write, and the change
// reaches the feed.
func moveAPI(t *testing.T, env *apitest.Env, id, from, to, reason, msg string) {
	t.Helper()
	if _, err := env.Jobs.UpdateJobStatus(context.Background(), &falconv1.UpdateJobStatusRequest{
		Id: id, ExpectedStatus: from, Status: to, Reason: reason, Message: msg}); err != nil {
		t.Fatal(err)
	}
}

// start runs c until the test ends.
func start(t *testing.T, c *expctl.Controller) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitFor waits up to 20 s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func reconcile(t *testing.T, c *expctl.Controller) {
	t.Helper()
	if err := c.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestPropagatesThroughTheAPI(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	c := expctl.New(env.Conn)
	exp := env.Create(t, "two", map[string]*falconv1.TaskSpec{
		"a": {Command: "x", Replica: 1}, "b": {Command: "y", Replica: 2},
	})
	a, b := exp.GetJobs()[0].GetId(), exp.GetJobs()[1].GetId()

	move(t, env, a, "Pending", "Running", "", "")
	reconcile(t, c)
	if got := env.Exp(t, exp.GetId()); got.GetStatus() != "Running" || got.GetStartedAt() == nil {
		t.Fatalf("one job running: exp %s started_at %v", got.GetStatus(), got.GetStartedAt())
	}

	move(t, env, a, "Running", "Failed", "JobFailed", "rank 0 exited with code 3")
	reconcile(t, c)
	got := env.Exp(t, exp.GetId())
	if got.GetStatus() != "Running" {
		t.Fatalf("exp %s while the sibling is being stopped, want Running", got.GetStatus())
	}
	if j := env.Job(t, b); j.GetStatus() != "Aborting" || j.GetReason() != "" || j.GetMessage() != "stopped because role a failed" {
		t.Fatalf("sibling %s/%q %q, want Aborting, no reason, a message naming role a", j.GetStatus(), j.GetReason(), j.GetMessage())
	}

	move(t, env, b, "Aborting", "Aborted", "", "stopped because role a failed")
	reconcile(t, c)
	got = env.Exp(t, exp.GetId())
	if got.GetStatus() != "Failed" || got.GetReason() != "JobFailed" || got.GetArtifact().GetStatus() != "Failed" || got.GetFinishedAt() == nil {
		t.Fatalf("exp %s/%s artifact %s, want Failed/JobFailed with artifact Failed", got.GetStatus(), got.GetReason(), got.GetArtifact().GetStatus())
	}
	v := got.GetVersion()
	reconcile(t, c) // reentrant: a second pass changes nothing
	if again := env.Exp(t, exp.GetId()); again.GetVersion() != v {
		t.Fatalf("second reconcile rewrote the experiment (version %d -> %d)", v, again.GetVersion())
	}
}

func TestAbortedExperimentClosesItsArtifact(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	c := expctl.New(env.Conn)
	exp := env.Create(t, "ab", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	if _, err := env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp.GetId()}); err != nil {
		t.Fatal(err)
	}
	reconcile(t, c)
	if got := env.Exp(t, exp.GetId()); got.GetStatus() != "Aborting" {
		t.Fatalf("exp %s before its job is aborted, want Aborting", got.GetStatus())
	}
	move(t, env, exp.GetJobs()[0].GetId(), "Aborting", "Aborted", "", "")
	reconcile(t, c)
	got := env.Exp(t, exp.GetId())
	if got.GetStatus() != "Aborted" || got.GetAbortedAt() == nil || got.GetArtifact().GetStatus() != "Failed" || got.GetArtifact().GetReason() != "Aborted" {
		t.Fatalf("exp %s aborted_at %v artifact %s/%s", got.GetStatus(), got.GetAbortedAt(), got.GetArtifact().GetStatus(), got.GetArtifact().GetReason())
	}
}

func TestAllSucceeded(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	c := expctl.New(env.Conn)
	exp := env.Create(t, "ok", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	j := exp.GetJobs()[0].GetId()
	move(t, env, j, "Pending", "Running", "", "")
	move(t, env, j, "Running", "Succeeded", "", "")
	reconcile(t, c) // Created -> Running -> Succeeded in one pass
	got := env.Exp(t, exp.GetId())
	if got.GetStatus() != "Succeeded" || got.GetArtifact().GetStatus() != "Succeeded" {
		t.Fatalf("exp %s artifact %s", got.GetStatus(), got.GetArtifact().GetStatus())
	}
}

// The artifacts of the experiments one cycle ends are written in one call,
// not one each; an artifact whose write is refused (it changed after the
// cycle read it) holds its experiment back, and the others end.
func TestArtifactsOfACycleAreOneWrite(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	var exps []string
	for i := range 5 {
		exp := env.Create(t, fmt.Sprintf("end-%d", i), map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
		j := exp.GetJobs()[0].GetId()
		move(t, env, j, "Pending", "Running", "", "")
		move(t, env, j, "Running", "Succeeded", "", "")
		exps = append(exps, exp.GetId())
	}
	held := env.Exp(t, exps[2]).GetArtifact()
	race := &beforeCall{ClientConnInterface: env.Conn, method: falconv1.ArtifactService_UpdateArtifactStatuses_FullMethodName, before: func() {
		if _, err := env.Arts.UpdateArtifactStatus(context.Background(), &falconv1.UpdateArtifactStatusRequest{
			Id: held.GetId(), ExpectedStatus: held.GetStatus(), Status: "Failed", Reason: "Lost", Message: "set by the test"}); err != nil {
			t.Error(err)
		}
	}}
	conn := apitest.CountCalls(race)
	c := expctl.New(conn)
	reconcile(t, c)
	calls := conn.Take()
	if calls["UpdateArtifactStatuses"] != 1 || calls["UpdateArtifactStatus"] != 0 {
		t.Errorf("%d UpdateArtifactStatuses and %d UpdateArtifactStatus calls for 5 ending experiments, want 1 and 0 (all calls: %v)",
			calls["UpdateArtifactStatuses"], calls["UpdateArtifactStatus"], calls)
	}
	for i, id := range exps {
		got := env.Exp(t, id)
		switch {
		case i == 2 && (got.GetArtifact().GetStatus() != "Failed" || got.GetStatus() == "Succeeded"):
			t.Errorf("experiment %d: %s with artifact %s, want the artifact's Failed kept and the experiment held back", i, got.GetStatus(), got.GetArtifact().GetStatus())
		case i != 2 && (got.GetStatus() != "Succeeded" || got.GetArtifact().GetStatus() != "Succeeded"):
			t.Errorf("experiment %d: %s with artifact %s, want both Succeeded", i, got.GetStatus(), got.GetArtifact().GetStatus())
		}
	}
}

// beforeCall runs before ahead of the first call to method: a write that
// lands between a controller's read and its own.
type beforeCall struct {
	grpc.ClientConnInterface
	method string
	once   sync.Once
	before func()
}

func (b *beforeCall) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if method == b.method {
		b.once.Do(b.before)
	}
	return b.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

// TestRunFollowsTheFeed: once running, the controller reads only the
// experiments the change feed names — a job's change reaches its
// experiment without a read of every live experiment. The changes are
// roles failing beside a running sibling: the one job change the API
// server does not carry to its experiment itself, since stopping the
// sibling is the controller's.
func TestRunFollowsTheFeed(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	type pair struct{ exp, a, b string }
	var pairs []pair
	for i := range 40 {
		exp := env.Create(t, fmt.Sprintf("e%d", i), map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}, "b": {Command: "y", Replica: 1}})
		p := pair{exp.GetId(), exp.GetJobs()[0].GetId(), exp.GetJobs()[1].GetId()}
		moveAPI(t, env, p.a, "Pending", "Running", "", "")
		moveAPI(t, env, p.b, "Pending", "Running", "", "")
		pairs = append(pairs, p)
	}
	solo := env.Create(t, "solo", map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}})
	conn := apitest.CountCalls(env.Conn)
	answered := &answeredCalls{ClientConnInterface: conn, n: map[string]int{}}
	c := expctl.New(answered, expctl.WithInterval(time.Hour), expctl.WithResync(time.Hour))
	start(t, c)
	// A full read lists each live status in turn (Created, Running,
	// Aborting), then the jobs and artifacts of what it found: counted
	// before those answer, the first read's own calls would look like
	// later ones, and a job moved meanwhile would be read ahead of its
	// experiment (which the controller then writes, and reads again).
	waitFor(t, "the first cycle's full read", func() bool {
		return fullReads(conn) >= 3 && answered.count("ListJobs") >= 1 && answered.count("ListArtifacts") >= 1
	})
	// A job change whose write settled its experiment (one role, no
	// time-to-live) is no news to the controller: it must never read
	// that experiment, though it reads the next change's, which the feed
	// carries after it.
	moveAPI(t, env, solo.GetJobs()[0].GetId(), "Pending", "Running", "", "")
	fail := func(p pair) {
		t.Helper()
		moveAPI(t, env, p.a, "Running", "Failed", "JobFailed", "exit 3")
		waitFor(t, "experiment "+p.exp+" stopping role b", func() bool {
			return env.Job(t, p.b).GetStatus() == "Aborting" && env.Exp(t, p.exp).GetMessage() == "role a failed; stopping the other roles"
		})
	}
	// The controller waits for the stream's hello before its first read
	// (watch.Follower.WaitConnected); had it read before, it reads
	// everything once more after the hello. Counting from the first
	// change's arrival leaves that start-up read out either way.
	var full int
	for i := range 3 {
		fail(pairs[i])
		if i == 0 {
			full = fullReads(conn)
		}
	}
	// The controller's own writes — the experiment's, derived, and the
	// sibling's abort, named as its own — must not wake it. Three more
	// changes it must act on show it was awake.
	for i := 3; i < 6; i++ {
		fail(pairs[i])
	}
	if got := fullReads(conn); got != full {
		t.Errorf("%d full reads of live experiments after the first, want none: the feed names what changed", got-full)
	}
	// Each change: its experiment read by ID (one call for all a cycle
	// names), never one read per live experiment, never a GetExp.
	var named []string
	for _, r := range conn.Requests("ListExps") {
		named = append(named, r.(*falconv1.ListExpsRequest).GetIds()...)
	}
	if len(named) > 6 {
		t.Errorf("%d experiments read by ID for 6 changes among 40 live ones (%v), want at most 6: the echo of a write woke the controller", len(named), named)
	}
	if slices.Contains(named, solo.GetId()) {
		t.Errorf("the settled experiment %s was read: %v", solo.GetId(), named)
	}
	if got := conn.Count("GetExp"); got != 0 {
		t.Errorf("%d GetExp calls, want 0: changed experiments are read in batches", got)
	}
	if got, writes := conn.Count("UpdateExpStatus"), conn.Count("UpdateExpStatuses"); got != 0 || writes < 1 || writes > 6 {
		t.Errorf("%d UpdateExpStatus and %d UpdateExpStatuses calls for 6 changes, want 0 and 1 to 6", got, writes)
	}
	if got := conn.Count("AbortJob"); got != 6 {
		t.Errorf("%d sibling aborts for 6 failed roles, want 6", got)
	}
}

// fullReads counts the ListExps calls that listed every experiment of a
// status, not ones named by ID.
// answeredCalls counts the unary calls that have returned, by method.
type answeredCalls struct {
	grpc.ClientConnInterface
	mu sync.Mutex
	n  map[string]int
}

func (a *answeredCalls) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	err := a.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
	a.mu.Lock()
	a.n[path.Base(method)]++
	a.mu.Unlock()
	return err
}

func (a *answeredCalls) count(method string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[method]
}

func fullReads(conn *apitest.Calls) int {
	n := 0
	for _, r := range conn.Requests("ListExps") {
		if len(r.(*falconv1.ListExpsRequest).GetIds()) == 0 {
			n++
		}
	}
	return n
}

// failFirst fails the first call to method once armed with Unavailable,
// without making it, as a server that went away for a moment would.
type failFirst struct {
	grpc.ClientConnInterface
	method string
	armed  atomic.Bool
}

func (f *failFirst) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if method == f.method && f.armed.CompareAndSwap(true, false) {
		return status.Error(codes.Unavailable, "connection refused")
	}
	return f.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

// A cycle whose batch write fails puts its experiments back: the next
// cycle (the safety-net poll here, the feed silent) writes them, without a
// full read of every live experiment.
func TestFailedWriteIsLookedAtAgain(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	// Each with a role that fails beside a running one: the change the
	// controller must write for (see TestRunFollowsTheFeed).
	roles := map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}, "b": {Command: "y", Replica: 1}}
	exp := env.Create(t, "again", roles)
	first := env.Create(t, "first", roles)
	for _, e := range []*falconv1.Experiment{exp, first} {
		for _, j := range e.GetJobs() {
			moveAPI(t, env, j.GetId(), "Pending", "Running", "", "")
		}
	}
	stopping := func(e *falconv1.Experiment) func() bool {
		return func() bool { return env.Exp(t, e.GetId()).GetMessage() == "role a failed; stopping the other roles" }
	}
	ff := &failFirst{ClientConnInterface: env.Conn, method: falconv1.ExperimentService_UpdateExpStatuses_FullMethodName}
	conn := apitest.CountCalls(ff)
	c := expctl.New(conn, expctl.WithInterval(20*time.Millisecond), expctl.WithResync(time.Hour))
	start(t, c)
	waitFor(t, "the first cycle's full read", func() bool { return fullReads(conn) >= 3 })
	// Counted from a first change's arrival, past the start-up reads (see
	// TestRunFollowsTheFeed): from here no full read is due.
	moveAPI(t, env, first.GetJobs()[0].GetId(), "Running", "Failed", "JobFailed", "exit 3")
	waitFor(t, "experiment "+first.GetId()+" stopping its other role", stopping(first))
	full := fullReads(conn)
	writes := conn.Count("UpdateExpStatuses")
	ff.armed.Store(true)
	moveAPI(t, env, exp.GetJobs()[0].GetId(), "Running", "Failed", "JobFailed", "exit 3")
	waitFor(t, "experiment "+exp.GetId()+" stopping its other role after its failed write", stopping(exp))
	if got := conn.Count("UpdateExpStatuses") - writes; got < 2 {
		t.Errorf("%d UpdateExpStatuses calls, want the failed one and its retry", got)
	}
	if got := fullReads(conn); got != full {
		t.Errorf("%d full reads after the failed write, want none: the experiment is put back, not everything read again", got-full)
	}
}

// records is a slog handler that keeps every record, for tests of what is
// logged at which level.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// held reports whether a pending mirror of reason was logged held.
func (r *records) held(reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if rec.Message != "pending mirror held" {
			continue
		}
		found := false
		rec.Attrs(func(a slog.Attr) bool {
			found = a.Key == "reason" && a.Value.String() == reason
			return !found
		})
		if found {
			return true
		}
	}
	return false
}

// levels returns the level of each record with message msg, in order.
func (r *records) levels(msg string) []slog.Level {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Level
	for _, rec := range r.recs {
		if rec.Message == msg {
			out = append(out, rec.Level)
		}
	}
	return out
}

// A queue position the expController mirrors onto a waiting experiment is
// progress, logged at debug; the experiment's move to another status is an
// event, at info. With every mirror at info, a queue of a thousand
// experiments filled the production log with five lines per experiment.
func TestMirroredPositionIsDebugAndAMoveIsInfo(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	rec := &records{}
	c := expctl.New(env.Conn, expctl.WithLogger(slog.New(rec)))
	exp := env.Create(t, "queued", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	j := exp.GetJobs()[0].GetId()

	move(t, env, j, "Pending", "Pending", "Waiting", "queue position #3")
	reconcile(t, c)
	if got := env.Exp(t, exp.GetId()); got.GetStatus() != "Created" || got.GetMessage() != "queue position #3" {
		t.Fatalf("exp %s %q, want Created with the job's position", got.GetStatus(), got.GetMessage())
	}
	if got := rec.levels("experiment status"); !slices.Equal(got, []slog.Level{slog.LevelDebug}) {
		t.Fatalf("levels after a mirrored position = %v, want [DEBUG]", got)
	}
	move(t, env, j, "Pending", "Running", "", "")
	reconcile(t, c)
	if got := rec.levels("experiment status"); !slices.Equal(got, []slog.Level{slog.LevelDebug, slog.LevelInfo}) {
		t.Fatalf("levels after the move to Running = %v, want [DEBUG INFO]", got)
	}
}

// A pending job's state reaches its experiment once it has held for a
// second: Next and Dispatching, replaced within it by the job's start,
// are never written to the experiment (its move to Running is, by the
// job's own write), and are read once, together, while a queue position
// that holds is written.
func TestAPendingMirrorWaitsForItsJobToSettle(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	rec := &records{}
	conn := apitest.CountCalls(env.Conn)
	c := expctl.New(conn, expctl.WithLogger(slog.New(rec)), expctl.WithInterval(time.Hour), expctl.WithResync(time.Hour))
	start(t, c)
	quick := env.Create(t, "quick", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	j := quick.GetJobs()[0].GetId()
	cycles := func() int { return len(rec.levels("expController cycle")) }
	waitFor(t, "the controller's first cycle", func() bool { return cycles() > 0 })

	before, reads := conn.Count("UpdateExpStatuses"), conn.Count("ListArtifacts")
	// Next, Dispatching and the start come within the grace, as in a
	// busy queue. The writes within Pending are mirrors: the follower
	// holds them (DeferMirrors) and names the experiment once the grace
	// has passed, when the job's start has made them moot.
	moveAPI(t, env, j, "Pending", "Pending", "Next", "next in line on cluster local")
	moveAPI(t, env, j, "Pending", "Pending", "Dispatching", "submitting to cluster local")
	seen := cycles()
	moveAPI(t, env, j, "Pending", "Running", "", "1/1 pods running")
	if got := env.Exp(t, quick.GetId()); got.GetStatus() != "Running" {
		t.Fatalf("experiment %s after its job's start, want Running (the job's write)", got.GetStatus())
	}
	waitFor(t, "the held mirrors looked at", func() bool { return cycles() > seen })
	if got := conn.Count("UpdateExpStatuses") - before; got != 0 {
		t.Errorf("%d experiment writes for states its job left within the grace, want 0", got)
	}
	if got := conn.Count("ListArtifacts") - reads; got != 1 {
		t.Errorf("the experiment was read %d times for its two mirror changes, want once", got)
	}

	waiting := env.Create(t, "waiting", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	moveAPI(t, env, waiting.GetJobs()[0].GetId(), "Pending", "Pending", "Waiting", "queue position #2, 1 ahead")
	waitFor(t, "the position that held mirrored", func() bool {
		return env.Exp(t, waiting.GetId()).GetMessage() == "queue position #2, 1 ahead"
	})
}
