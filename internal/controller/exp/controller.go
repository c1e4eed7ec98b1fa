package exp

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/controller/watch"
	"github.com/falconhq/falcon/internal/lifecycle"
)

// Controller is the expController.
type Controller struct {
	exps     falconv1.ExperimentServiceClient
	jobs     falconv1.JobServiceClient
	arts     falconv1.ArtifactServiceClient
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time
	// warned remembers the expiry each experiment was last warned of, so
	// one inside its warning window is not asked about every cycle.
	warned map[string]time.Time

	loop watch.Loop
	// follower reports which experiments changed; nil until Run starts
	// it, so a bare Reconcile (as tests call it) reads every live one.
	follower    *watch.Follower
	resyncEvery time.Duration
	// live is every live experiment as last read, kept current from the
	// change feed between resyncs: TTLs are checked against it without a
	// read. A restart loses nothing: the first cycle is a resync.
	live       map[string]*falconv1.Experiment
	resyncedAt time.Time
	// mirrorHeld is when each pending mirror waiting for mirrorDue was first
	// held, by experiment. Memory: a restart forgets it, and its first
	// cycle, a resync, holds or writes each mirror afresh.
	mirrorHeld map[string]time.Time
	// writer names this controller on its writes (falconv1.WriterKey), so
	// that its follower skips the echo of its own sibling aborts: a
	// cycle that aborted them has already written what follows from
	// them, and the jobs' ends that come later are other writers'.
	writer string
}

// Option configures a Controller.
type Option func(*Controller)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(c *Controller) { c.log = l } }

// WithInterval sets the safety-net poll interval (default 5s); changes
// reported by the API server trigger a cycle at once.
func WithInterval(d time.Duration) Option { return func(c *Controller) { c.interval = d } }

// WithResync sets how often every live experiment is read again although
// the change feed reported nothing (default 30s): the safety net for writes
// made through another API server replica, whose changes this one's feed
// does not carry.
func WithResync(d time.Duration) Option { return func(c *Controller) { c.resyncEvery = d } }

// WithClock replaces time.Now, for tests of time-to-live.
func WithClock(now func() time.Time) Option { return func(c *Controller) { c.now = now } }

// New returns a controller talking to the API server over conn.
func New(conn grpc.ClientConnInterface, opts ...Option) *Controller {
	c := &Controller{
		exps:     falconv1.NewExperimentServiceClient(conn),
		jobs:     falconv1.NewJobServiceClient(conn),
		arts:     falconv1.NewArtifactServiceClient(conn),
		log:      slog.Default(),
		interval: 5 * time.Second,
		now:      time.Now,
		warned:   map[string]time.Time{},

		resyncEvery: 30 * time.Second,
		live:        map[string]*falconv1.Experiment{},
		mirrorHeld:  map[string]time.Time{},
		writer:      "expcontroller-" + rand.Text(),
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Run reconciles until ctx is done or Shutdown is called: on every change
// the API server reports, and every interval regardless. Cancelling ctx
// also cuts the cycle in flight; Shutdown lets it finish. Run is called
// once per Controller.
func (c *Controller) Run(ctx context.Context) error {
	ctx = metadata.AppendToOutgoingContext(ctx, falconv1.WriterKey, c.writer)
	// A pending mirror is written once its job's state has held for
	// mirrorGrace (mirrorDue), so its changes may come that late.
	c.follower = watch.Follow(ctx, c.jobs, c.log, watch.Skip(c.writer), watch.SkipSettled(), watch.DeferMirrors(mirrorGrace))
	c.follower.WaitConnected(ctx)
	return c.loop.RunOn(ctx, c.follower.Wake(), c.log, c.interval, "expController", c.Reconcile)
}

// Shutdown drains the controller (watch.Loop.Shutdown).
func (c *Controller) Shutdown(ctx context.Context) error { return c.loop.Shutdown(ctx) }

// Reconcile runs one cycle:
//  1. read the experiments to look at: those the change feed named since
//     the last cycle (a job's change names its experiment), or, on a
//     resync, every live experiment (Created, Running, Aborting) and those
//     of open artifacts (Created), to close the artifacts of experiments
//     that ended while a previous cycle was interrupted. A resync comes on
//     the first cycle, whenever the feed cannot vouch for what it missed,
//     and every resyncEvery; without a feed (a bare Reconcile) every cycle
//     is one;
//  2. read all their jobs and artifacts in batches (a few calls per
//     thousand experiments, not one per experiment);
//  3. for each experiment compute the plan (lifecycle.Propagate) and apply
//     it in order — abort sibling jobs, update the artifact, update the
//     experiment — with the experiment updates of the whole cycle in one
//     UpdateExpStatuses transaction (apply). A failed update is logged with
//     the experiment and job it concerns, the experiment is looked at again
//     next cycle, and the cycle moves on;
//  4. ask the API server to end or warn the live experiments whose ttl or
//     idle_ttl is up or near (ttlDue).
//
// So whatever a job's write left to it reaches the experiment in the
// cycle that write wakes, which reads that one experiment, not every live
// one, and a cycle after a burst of changes costs a few calls, not a few
// per experiment. The
// controller's own writes are derived changes (falconv1.Change.derived):
// their echo does not wake it.
func (c *Controller) Reconcile(ctx context.Context) error {
	start := time.Now()
	exps, err := c.toLookAt(ctx)
	if err != nil {
		return err
	}
	read := time.Since(start)
	defer func() {
		c.log.Debug("expController cycle", "exps", len(exps), "read", read, "took", time.Since(start))
	}()
	ids := make([]string, 0, len(exps))
	for _, e := range exps {
		ids = append(ids, e.GetId())
	}
	jobs := map[string][]*falconv1.Job{}
	arts := map[string]*falconv1.Artifact{}
	for start := 0; start < len(ids); start += batch {
		chunk := ids[start:min(start+batch, len(ids))]
		if err := c.readBatch(ctx, chunk, jobs, arts); err != nil {
			return err
		}
	}
	c.apply(ctx, exps, jobs, arts)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	c.enforceTTL(ctx)
	return nil
}

// toLookAt reads the experiments this cycle looks at (Reconcile, step 1)
// and brings the live set up to date with what it read.
func (c *Controller) toLookAt(ctx context.Context) ([]*falconv1.Experiment, error) {
	var changed []string
	resync := c.follower == nil || time.Since(c.resyncedAt) >= c.resyncEvery
	if c.follower != nil {
		var feedResync bool
		changed, feedResync = c.follower.Take()
		resync = resync || feedResync
	}
	if resync {
		exps, err := c.liveExperiments(ctx)
		if err != nil {
			if c.follower != nil {
				c.follower.Again()
			}
			return nil, err
		}
		clear(c.live)
		for _, e := range exps {
			c.keep(e)
		}
		c.resyncedAt = time.Now()
		return exps, nil
	}
	// One ListExps per batch IDs: a burst of changes (a thousand creates,
	// every queue position moving) costs a few calls, not one each.
	var exps []*falconv1.Experiment
	var failed []string
	var first error
	for start := 0; start < len(changed); start += batch {
		chunk := changed[start:min(start+batch, len(changed))]
		resp, err := c.exps.ListExps(ctx, &falconv1.ListExpsRequest{Ids: chunk, PageSize: int32(len(chunk))})
		if err != nil {
			failed = append(failed, chunk...)
			if first == nil {
				first = err
			}
			continue
		}
		found := make(map[string]bool, len(resp.GetItems()))
		for _, e := range resp.GetItems() {
			found[e.GetId()] = true
			c.keep(e)
			exps = append(exps, e)
		}
		for _, id := range chunk {
			if !found[id] {
				delete(c.live, id) // deleted
				delete(c.mirrorHeld, id)
			}
		}
	}
	if first != nil {
		// Those that failed are read again next cycle; those read are
		// looked at now.
		c.follower.Return(failed)
		if len(exps) == 0 {
			return nil, first
		}
		c.log.Warn("read changed experiments", "failed", len(failed), "err", first)
	}
	return exps, nil
}

// inFlight bounds the experiments whose sibling aborts and artifact
// updates are applied at once.
const inFlight = 8

// keep records e in the live set, or drops it once it is terminal.
func (c *Controller) keep(e *falconv1.Experiment) {
	if lifecycle.ExperimentMachine.IsTerminal(lifecycle.Status(e.GetStatus())) {
		delete(c.live, e.GetId())
		return
	}
	c.live[e.GetId()] = e
}

// batch is how many experiments one ListExps call reads, one ListJobs call
// asks the jobs of, and one UpdateExpStatuses call writes (the API server
// takes up to 1000).
const batch = 500

// readBatch reads the jobs and the artifacts of the experiments ids, the
// two lists at once: they are independent reads, and a cycle's latency (a
// job's end reaching its experiment) is what they add up to.
func (c *Controller) readBatch(ctx context.Context, ids []string, jobs map[string][]*falconv1.Job, arts map[string]*falconv1.Artifact) error {
	var g errgroup.Group
	var js []*falconv1.Job
	var as []*falconv1.Artifact
	g.Go(func() error {
		return allPages(func(token string) (string, error) {
			resp, err := c.jobs.ListJobs(ctx, &falconv1.ListJobsRequest{ExpIds: ids, PageSize: 1000, PageToken: token})
			js = append(js, resp.GetItems()...)
			return resp.GetNextPageToken(), err
		})
	})
	g.Go(func() error {
		return allPages(func(token string) (string, error) {
			resp, err := c.arts.ListArtifacts(ctx, &falconv1.ListArtifactsRequest{ExpIds: ids, PageSize: 1000, PageToken: token})
			as = append(as, resp.GetItems()...)
			return resp.GetNextPageToken(), err
		})
	})
	if err := g.Wait(); err != nil {
		return err
	}
	for _, j := range js {
		jobs[j.GetExpId()] = append(jobs[j.GetExpId()], j)
	}
	for _, a := range as {
		if _, ok := arts[a.GetExpId()]; !ok {
			arts[a.GetExpId()] = a
		}
	}
	return nil
}

// allPages calls list with each page's token, the first one's empty,
// until a page says it is the last (its next token is empty) or list
// fails.
func allPages(list func(token string) (next string, err error)) error {
	for token := ""; ; {
		next, err := list(token)
		if err != nil || next == "" {
			return err
		}
		token = next
	}
}

func (c *Controller) liveExperiments(ctx context.Context) ([]*falconv1.Experiment, error) {
	seen := map[string]bool{}
	var out []*falconv1.Experiment
	for _, st := range []lifecycle.Status{lifecycle.Created, lifecycle.Running, lifecycle.Aborting} {
		if err := allPages(func(token string) (string, error) {
			resp, err := c.exps.ListExps(ctx, &falconv1.ListExpsRequest{Status: string(st), PageSize: 1000, PageToken: token})
			for _, e := range resp.GetItems() {
				if !seen[e.GetId()] {
					seen[e.GetId()] = true
					out = append(out, e)
				}
			}
			return resp.GetNextPageToken(), err
		}); err != nil {
			return nil, err
		}
	}
	err := allPages(func(token string) (string, error) {
		resp, err := c.arts.ListArtifacts(ctx, &falconv1.ListArtifactsRequest{Statuses: []string{string(lifecycle.Created)}, PageSize: 1000, PageToken: token})
		if err != nil {
			return "", err
		}
		for _, a := range resp.GetItems() {
			if seen[a.GetExpId()] {
				continue
			}
			// Rare: an experiment that ended with its artifact still open.
			e, err := c.exps.GetExp(ctx, &falconv1.GetExpRequest{Id: a.GetExpId()})
			if err != nil {
				if status.Code(err) != codes.NotFound {
					c.log.Warn("get experiment", "exp", a.GetExpId(), "err", err)
				}
				continue
			}
			seen[e.GetId()] = true
			out = append(out, e)
		}
		return resp.GetNextPageToken(), nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// plan is the experiment's lifecycle.Propagate plan from what was read.
func plan(exp *falconv1.Experiment, expJobs []*falconv1.Job, a *falconv1.Artifact) lifecycle.Plan {
	jobs := make([]lifecycle.Entity, 0, len(expJobs))
	for _, j := range expJobs {
		e := lifecycle.Entity{ID: j.GetId(), Role: j.GetRole(), Status: lifecycle.Status(j.GetStatus()), Reason: j.GetReason(), Message: j.GetMessage()}
		if t := j.GetStartedAt(); t != nil {
			e.StartedAt = t.AsTime()
		}
		if t := j.GetFinishedAt(); t != nil {
			e.FinishedAt = t.AsTime()
		}
		jobs = append(jobs, e)
	}
	var art *lifecycle.Entity
	if a != nil {
		art = &lifecycle.Entity{ID: a.GetId(), Status: lifecycle.Status(a.GetStatus()), Reason: a.GetReason(), Message: a.GetMessage()}
	}
	return lifecycle.Propagate(lifecycle.Entity{ID: exp.GetId(), Status: lifecycle.Status(exp.GetStatus()), Reason: exp.GetReason(), Message: exp.GetMessage()}, jobs, art)
}

// apply carries out the plans of exps (Reconcile, step 3). Each
// experiment's writes stay in its plan's order: first the sibling aborts
// (rare: an experiment whose role failed), inFlight experiments at a time;
// then every artifact update of the cycle in one UpdateArtifactStatuses
// transaction, and every experiment update in one UpdateExpStatuses
// transaction, each applying its updates in order, each under its
// precondition. An experiment whose artifact could not be updated is left
// out (it follows its artifact). Whatever did not land is looked at again
// next cycle: a derived write's echo does not come back on the feed.
func (c *Controller) apply(ctx context.Context, exps []*falconv1.Experiment, jobs map[string][]*falconv1.Job, arts map[string]*falconv1.Artifact) {
	plans := make([]lifecycle.Plan, len(exps))
	held := make([]bool, len(exps))
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	now := c.now()
	var later []string
	var earliest time.Time
	for i, e := range exps {
		plans[i] = plan(e, jobs[e.GetId()], arts[e.GetId()])
		if c.follower != nil {
			if due := mirrorDue(plans[i], jobs[e.GetId()], c.mirrorHeld[e.GetId()], now); !due.IsZero() {
				if c.mirrorHeld[e.GetId()].IsZero() {
					c.mirrorHeld[e.GetId()] = now
				}
				c.log.Debug("pending mirror held", "exp", e.GetId(), "reason", plans[i].Exp[0].Reason, "until", due)
				plans[i] = lifecycle.Plan{}
				later = append(later, e.GetId())
				if earliest.IsZero() || due.Before(earliest) {
					earliest = due
				}
			} else {
				delete(c.mirrorHeld, e.GetId())
			}
		}
		held[i] = true
		if len(plans[i].AbortJobs) == 0 {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c.abortSiblings(ctx, e, plans[i])
		}()
	}
	wg.Wait()
	if len(later) > 0 {
		// Looked at again when the first is due; one not due yet then is
		// held again.
		f := c.follower
		time.AfterFunc(min(max(earliest.Sub(now), time.Millisecond), mirrorMaxWait), func() { f.Remind(later) })
	}
	c.applyArtifacts(ctx, exps, plans, held)
	var again []string
	var reqs []*falconv1.UpdateExpStatusRequest
	for i, e := range exps {
		if !held[i] {
			again = append(again, e.GetId())
			continue
		}
		for _, u := range plans[i].Exp {
			r := &falconv1.UpdateExpStatusRequest{
				Id: u.ID, ExpectedStatus: string(u.From), Status: string(u.To), Reason: u.Reason, Message: u.Message,
			}
			if !u.StartedAt.IsZero() {
				r.StartedAt = timestamppb.New(u.StartedAt)
			}
			if !u.FinishedAt.IsZero() {
				r.FinishedAt = timestamppb.New(u.FinishedAt)
			}
			reqs = append(reqs, r)
		}
	}
	for start := 0; start < len(reqs); start += batch {
		chunk := reqs[start:min(start+batch, len(reqs))]
		resp, err := c.exps.UpdateExpStatuses(ctx, &falconv1.UpdateExpStatusesRequest{Updates: chunk})
		if err != nil {
			c.log.Warn("update experiment statuses", "exps", len(chunk), "err", err)
			for _, r := range chunk {
				again = append(again, r.GetId())
			}
			continue
		}
		for i, r := range resp.GetResults() {
			u := chunk[i]
			log := c.log.With("exp", u.GetId())
			if e := r.GetExperiment(); e != nil {
				c.keep(e)
				// As the API server logs what a job's write does to its
				// experiment: a change of status is an event (info), a
				// mirrored queue position within one is progress (debug),
				// else every queued experiment's every move is an info line.
				level := slog.LevelDebug
				if u.GetExpectedStatus() != u.GetStatus() {
					level = slog.LevelInfo
				}
				log.Log(ctx, level, "experiment status", "exp_name", e.GetName(), "cluster", e.GetClusterName(), "from", u.GetExpectedStatus(), "to", u.GetStatus(), "reason", u.GetReason())
				continue
			}
			logUpdate(log, "experiment", u.GetId(), status.Error(codes.Code(r.GetCode()), r.GetMessage()))
			again = append(again, u.GetId())
		}
	}
	if len(again) > 0 && c.follower != nil {
		c.follower.Return(again)
	}
}

// abortSiblings aborts the experiment's sibling jobs its plan names.
func (c *Controller) abortSiblings(ctx context.Context, exp *falconv1.Experiment, p lifecycle.Plan) {
	for _, u := range p.AbortJobs {
		if _, err := c.jobs.AbortJob(ctx, &falconv1.AbortJobRequest{Id: u.ID, Reason: u.Reason, Message: u.Message}); err != nil {
			c.log.Warn("abort sibling job", "exp", exp.GetId(), "job", u.ID, "err", err)
		}
	}
}

// applyArtifacts writes the artifact updates of the plans, in batches;
// held[i] becomes false for an experiment whose artifact update did not
// land, so that it, which follows its artifact, waits for the next cycle.
func (c *Controller) applyArtifacts(ctx context.Context, exps []*falconv1.Experiment, plans []lifecycle.Plan, held []bool) {
	var reqs []*falconv1.UpdateArtifactStatusRequest
	var of []int // the experiment of each request
	for i, p := range plans {
		if u := p.Artifact; u != nil {
			reqs = append(reqs, &falconv1.UpdateArtifactStatusRequest{
				Id: u.ID, ExpectedStatus: string(u.From), Status: string(u.To), Reason: u.Reason, Message: u.Message,
			})
			of = append(of, i)
		}
	}
	for start := 0; start < len(reqs); start += batch {
		chunk := reqs[start:min(start+batch, len(reqs))]
		resp, err := c.arts.UpdateArtifactStatuses(ctx, &falconv1.UpdateArtifactStatusesRequest{Updates: chunk})
		if err == nil && len(resp.GetResults()) != len(chunk) {
			err = fmt.Errorf("%d results for %d artifact updates", len(resp.GetResults()), len(chunk))
		}
		for k, u := range chunk {
			e := exps[of[start+k]]
			switch {
			case err != nil:
				logUpdate(c.log.With("exp", e.GetId()), "artifact", u.GetId(), err)
			case resp.GetResults()[k].GetArtifact() == nil:
				r := resp.GetResults()[k]
				logUpdate(c.log.With("exp", e.GetId(), "exp_name", e.GetName()), "artifact", u.GetId(), status.Error(codes.Code(r.GetCode()), r.GetMessage()))
			default:
				continue
			}
			held[of[start+k]] = false
		}
	}
}

// logUpdate logs a failed write. A FailedPrecondition is expected (someone,
// usually a user's abort, changed the row after we read it) and is not a
// warning: the next cycle reads the new state.
func logUpdate(log *slog.Logger, kind, id string, err error) {
	if status.Code(err) == codes.FailedPrecondition || errors.Is(err, context.Canceled) {
		log.Debug("update lost a race; will retry", "kind", kind, "id", id, "err", err)
		return
	}
	log.Warn("update status", "kind", kind, "id", id, "err", err)
}
