package watch_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/controller/watch"
	"github.com/falconhq/falcon/internal/testenv/apitest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
)

// A Follower against a real API server: its first Take says resync (it has
// read nothing yet), then it names exactly the experiments written since;
// a derived change names nothing; Again and Return put back what a caller
// could not read.
func TestFollowerNamesWhatChanged(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := watch.Follow(ctx, falconv1.NewJobServiceClient(env.Conn), slog.New(slog.DiscardHandler))
	<-f.Wake() // the hello: connected
	if exps, resync := f.Take(); !resync || len(exps) != 0 {
		t.Fatalf("first Take = %v, %v; want a resync", exps, resync)
	}
	role := map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}}
	a := env.Create(t, "follow-a", role).GetId()
	b := env.Create(t, "follow-b", role).GetId()
	var got []string
	for deadline := time.Now().Add(10 * time.Second); len(got) < 2; {
		select {
		case <-f.Wake():
		case <-time.After(time.Until(deadline)):
			t.Fatalf("woken for %v only, want %s and %s", got, a, b)
		}
		exps, resync := f.Take()
		if resync {
			t.Fatal("Take says resync on a stream that never broke")
		}
		got = append(got, exps...)
	}
	slices.Sort(got)
	want := []string{a, b}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("changed experiments %v, want %v", got, want)
	}
	// A derived change (the expController's mirror of its jobs) names
	// nothing: the next Take holds only what was written after it.
	if _, err := falconv1.NewExperimentServiceClient(env.Conn).UpdateExpStatuses(ctx, &falconv1.UpdateExpStatusesRequest{
		Updates: []*falconv1.UpdateExpStatusRequest{{Id: a, ExpectedStatus: "Created", Status: "Created", Message: "mirrored"}},
	}); err != nil {
		t.Fatal(err)
	}
	c := env.Create(t, "follow-c", role).GetId()
	// A wake left over from the creates above may come first: take until
	// c is named, and nothing else may be.
	for seen := false; !seen; {
		select {
		case <-f.Wake():
		case <-time.After(10 * time.Second):
			t.Fatalf("not woken for %s", c)
		}
		exps, _ := f.Take()
		for _, id := range exps {
			if id != c {
				t.Fatalf("after a derived change and a create: Take named %s, want %s alone", id, c)
			}
			seen = true
		}
	}
	f.Return([]string{a})
	if exps, resync := f.Take(); resync || !slices.Equal(exps, []string{a}) {
		t.Fatalf("after Return: Take = %v, %v; want [%s], false", exps, resync, a)
	}
	f.Again()
	if _, resync := f.Take(); !resync {
		t.Fatal("after Again: Take does not say resync")
	}
}

// gatedJobs holds WatchChanges until open is closed: the stream of a
// Follower whose caller reads the store before the stream is up.
type gatedJobs struct {
	falconv1.JobServiceClient
	open chan struct{}
}

func (g gatedJobs) WatchChanges(ctx context.Context, req *falconv1.WatchChangesRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[falconv1.Change], error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.JobServiceClient.WatchChanges(ctx, req, opts...)
}

// A change written after the caller's first read but before the stream's
// hello is on neither: the Take after the hello says resync again, so the
// caller's snapshot cannot keep a row older than the store's for good.
func TestFollowerResyncsOnceConnected(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := gatedJobs{JobServiceClient: falconv1.NewJobServiceClient(env.Conn), open: make(chan struct{})}
	f := watch.Follow(ctx, g, slog.New(slog.DiscardHandler))
	if _, resync := f.Take(); !resync {
		t.Fatal("first Take does not say resync")
	}
	env.Create(t, "between", map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}})
	early, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	defer stop()
	if f.WaitConnected(early) {
		t.Fatal("WaitConnected says connected before the stream opened")
	}
	close(g.open)
	if !f.WaitConnected(ctx) {
		t.Fatal("the stream never said hello")
	}
	if exps, resync := f.Take(); !resync {
		t.Fatalf("Take after the hello = %v, false; want a resync (the create before the hello is on no stream)", exps)
	}
	if _, resync := f.Take(); resync {
		t.Fatal("a second Take after the hello says resync again")
	}
}

// A follower that names itself (Skip) is not told of its own writes, which
// it holds already, but is told of everyone else's; one that does not name
// itself hears them all.
func TestFollowerSkipsItsOwnWrites(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobs := falconv1.NewJobServiceClient(env.Conn)
	self := watch.Follow(ctx, jobs, slog.New(slog.DiscardHandler), watch.Skip("me"))
	other := watch.Follow(ctx, jobs, slog.New(slog.DiscardHandler))
	for _, f := range []*watch.Follower{self, other} {
		<-f.Wake() // the hello
		f.Take()   // its resync
	}
	role := map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}}
	mine := env.Create(t, "mine", role)
	theirs := env.Create(t, "theirs", role)
	write := func(exp *falconv1.Experiment, writer string) {
		t.Helper()
		wctx := ctx
		if writer != "" {
			wctx = metadata.AppendToOutgoingContext(ctx, falconv1.WriterKey, writer)
		}
		if _, err := jobs.UpdateJobStatuses(wctx, &falconv1.UpdateJobStatusesRequest{Updates: []*falconv1.UpdateJobStatusRequest{{
			Id: exp.GetJobs()[0].GetId(), ExpectedStatus: "Pending", Status: "Pending", Reason: "Waiting", Message: "written by " + writer,
		}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Until both creates have been named, then the two writes: each
	// follower's Take holds what it was told, in any grouping.
	until := func(f *watch.Follower, want map[string]bool) map[string]bool {
		t.Helper()
		got := map[string]bool{}
		for deadline := time.After(10 * time.Second); ; {
			exps, _ := f.Take()
			for _, id := range exps {
				got[id] = true
			}
			done := true
			for id := range want {
				done = done && got[id]
			}
			if done {
				return got
			}
			select {
			case <-f.Wake():
			case <-deadline:
				t.Fatalf("named %v, want at least %v", got, want)
			}
		}
	}
	both := map[string]bool{mine.GetId(): true, theirs.GetId(): true}
	until(self, both)
	until(other, both)
	write(mine, "me")
	write(theirs, "someone-else")
	// The last write is theirs: once a follower has heard of it, it has
	// heard of mine too if it ever will (one stream, in order).
	if got := until(self, map[string]bool{theirs.GetId(): true}); got[mine.GetId()] {
		t.Errorf("the follower named \"me\" was told of its own write to %s", mine.GetId())
	}
	if got := until(other, map[string]bool{theirs.GetId(): true}); !got[mine.GetId()] {
		t.Errorf("a follower with no name was not told of the write to %s", mine.GetId())
	}
}

// A follower that skips settled changes (SkipSettled) is not told of a
// job write that settled its experiment, but is of one that did not (a
// role failing beside a running one); one that does not skip them hears
// both.
func TestFollowerSkipsSettledChanges(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobs := falconv1.NewJobServiceClient(env.Conn)
	deriving := watch.Follow(ctx, jobs, slog.New(slog.DiscardHandler), watch.SkipSettled())
	moving := watch.Follow(ctx, jobs, slog.New(slog.DiscardHandler))
	for _, f := range []*watch.Follower{deriving, moving} {
		if !f.WaitConnected(ctx) {
			t.Fatal("no hello on the change stream")
		}
		if _, resync := f.Take(); !resync {
			t.Fatal("a follower's first Take did not ask to read everything")
		}
	}
	settled := env.Create(t, "settled", map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}})
	open := env.Create(t, "open", map[string]*falconv1.TaskSpec{"a": {Command: "true", Replica: 1}, "b": {Command: "true", Replica: 1}})
	for _, j := range open.GetJobs() {
		if _, err := jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: j.GetId(), ExpectedStatus: "Pending", Status: "Running"}); err != nil {
			t.Fatal(err)
		}
	}
	// A fence both followers hear of: once one has, the setup's writes
	// (still arriving when a loaded machine runs the test) are behind it,
	// and the names below come from the writes under test alone. It has a
	// time-to-live, so its creation is not settled.
	fence, err := env.Exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{Name: "fence", Ttl: durationpb.New(time.Hour),
		RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*watch.Follower{deriving, moving} {
		namesUntil(t, f, fence.GetId())
	}
	if _, err := jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: settled.GetJobs()[0].GetId(), ExpectedStatus: "Pending", Status: "Running"}); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: open.GetJobs()[0].GetId(), ExpectedStatus: "Running", Status: "Failed", Reason: "JobFailed", Message: "exit 1"}); err != nil {
		t.Fatal(err)
	}
	// The unsettled write is the last: once a follower has heard of it,
	// it has heard of the settled one too if it ever will.
	if got := namesUntil(t, deriving, open.GetId()); got[settled.GetId()] {
		t.Errorf("a follower skipping settled changes was told of %s", settled.GetId())
	}
	if got := namesUntil(t, moving, open.GetId()); !got[settled.GetId()] {
		t.Errorf("a follower of every job change was not told of %s", settled.GetId())
	}
}

// A follower that defers mirrors (DeferMirrors) names the experiment of a
// write within Pending only once the delay has passed, and that of any
// other change at once; one that does not names both at once.
func TestFollowerDefersMirrors(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobs := falconv1.NewJobServiceClient(env.Conn)
	never := watch.Follow(ctx, jobs, slog.New(slog.DiscardHandler), watch.DeferMirrors(time.Hour))
	soon := watch.Follow(ctx, jobs, slog.New(slog.DiscardHandler), watch.DeferMirrors(50*time.Millisecond))
	plain := watch.Follow(ctx, jobs, slog.New(slog.DiscardHandler))
	for _, f := range []*watch.Follower{never, soon, plain} {
		if !f.WaitConnected(ctx) {
			t.Fatal("no hello on the change stream")
		}
		f.Take() // the first resync
	}
	waiting := env.Create(t, "waiting", map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}})
	starting := env.Create(t, "starting", map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}})
	// The creations, which these followers do not skip, are behind them.
	for _, f := range []*watch.Follower{never, soon, plain} {
		namesUntil(t, f, starting.GetId())
	}
	for _, u := range []*falconv1.UpdateJobStatusRequest{
		{Id: waiting.GetJobs()[0].GetId(), ExpectedStatus: "Pending", Status: "Pending", Reason: "Waiting", Message: "queue position #2, 1 ahead"},
		{Id: starting.GetJobs()[0].GetId(), ExpectedStatus: "Pending", Status: "Running"},
	} {
		if _, err := jobs.UpdateJobStatus(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	// The start was written after the position, so a follower that has
	// named it has had the position's change too.
	if got := namesUntil(t, never, starting.GetId()); got[waiting.GetId()] {
		t.Errorf("a follower deferring mirrors for an hour named the waiting experiment: %v", got)
	}
	if got := namesUntil(t, plain, starting.GetId()); !got[waiting.GetId()] {
		t.Errorf("a follower not deferring mirrors named %v, want the waiting experiment too", got)
	}
	namesUntil(t, soon, waiting.GetId())
}

// namesUntil takes from f until it names last, and returns every
// experiment it named on the way.
func namesUntil(t *testing.T, f *watch.Follower, last string) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for deadline := time.After(10 * time.Second); !got[last]; {
		exps, _ := f.Take()
		for _, id := range exps {
			got[id] = true
		}
		if got[last] {
			break
		}
		select {
		case <-f.Wake():
		case <-deadline:
			t.Fatalf("named %v, want %s", got, last)
		}
	}
	return got
}
