package watch

import (
	"context"
	"log/slog"
	"sync"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// Follower keeps the set of experiments changed since the caller last
// asked (derived changes left out, see note), from a WatchChanges stream
// resumed across reconnects. When it
// cannot vouch that the set is complete — its first connection, a stream
// that broke and could not be resumed (another server, a restarted one, a
// gap the server no longer holds) — it says resync, and the caller reads
// everything again.
type Follower struct {
	wake      chan struct{}
	connected chan struct{} // closed at the first hello
	hello     bool          // connected is closed (under mu)

	// self is the caller's writer name (Skip): changes it wrote itself
	// are no news to it.
	self string
	// skipSettled leaves out settled job changes (SkipSettled).
	skipSettled bool
	// deferMirrors holds mirror changes this long (DeferMirrors).
	deferMirrors time.Duration

	mu   sync.Mutex
	exps map[string]bool
	// deferred are the experiments of mirror changes held until the
	// timer (deferTimer) names them all at once.
	deferred   map[string]bool
	deferTimer bool
	resync     bool
	epoch      string
	seq        int64
	streams    int // connections made, for tests and logs
}

// FollowOption configures a Follower.
type FollowOption func(*Follower)

// Skip leaves out the changes whose writer is name (falconv1.WriterKey):
// the echoes of the caller's own writes, for a caller that keeps the rows
// its writes return. A write whose answer it did not get (the call failed)
// is its to read again (Return): the echo will not say whether it landed.
func Skip(name string) FollowOption { return func(f *Follower) { f.self = name } }

// SkipSettled leaves out the job changes whose write also settled their
// experiment (falconv1.Change.settled): news to a caller that moves jobs,
// none to one that only derives experiments from them.
func SkipSettled() FollowOption { return func(f *Follower) { f.skipSettled = true } }

// DeferMirrors holds each mirror change (falconv1.Change.mirror) for up to
// d before naming its experiment, so the mirror changes of a busy second
// come to the caller as one set instead of a wake each. For a caller
// that writes a mirror only once it has held for d anyway: the resource
// manager's writes within Pending each woke the expController to read an
// experiment, its jobs and its artifact, three calls per write, to find a
// mirror not yet due. A change of any other kind names its experiment at
// once, also one whose mirror is held.
func DeferMirrors(d time.Duration) FollowOption {
	return func(f *Follower) { f.deferMirrors = d }
}

// Follow starts following the API server's changes until ctx is done.
func Follow(ctx context.Context, jobs falconv1.JobServiceClient, log *slog.Logger, opts ...FollowOption) *Follower {
	f := &Follower{wake: make(chan struct{}, 1), connected: make(chan struct{}), exps: map[string]bool{}, deferred: map[string]bool{}, resync: true}
	for _, o := range opts {
		o(f)
	}
	go f.run(ctx, jobs, log)
	return f
}

// Wake receives a value (coalesced) whenever something changed.
func (f *Follower) Wake() <-chan struct{} { return f.wake }

// WaitConnected returns once the stream has said hello for the first
// time (true), or after ConnectWait or when ctx ends (false). A loop that
// calls it before its first Take reads everything once at start rather
// than twice (a resync taken before the hello is repeated after it, see
// note).
func (f *Follower) WaitConnected(ctx context.Context) bool {
	t := time.NewTimer(ConnectWait)
	defer t.Stop()
	select {
	case <-f.connected:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// ConnectWait bounds WaitConnected: a stream over a working connection
// says hello in milliseconds, and an API server that is down must not hold
// back for long the cycle that would report it.
const ConnectWait = 2 * time.Second

// Take returns the experiments changed since the last Take, and whether the
// caller must instead read everything again (the set is then empty).
func (f *Follower) Take() (exps []string, resync bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.resync {
		f.resync = false
		clear(f.exps)
		return nil, true
	}
	for id := range f.exps {
		exps = append(exps, id)
	}
	clear(f.exps)
	return exps, false
}

// Again makes the next Take say resync: the caller could not read what the
// last one asked for.
func (f *Follower) Again() {
	f.mu.Lock()
	f.resync = true
	f.mu.Unlock()
}

// Return asks for these experiments again at the next Take: ones a
// caller took but could not read, or whose rows it found changed under it
// (a conditional write refused), so that it reads them again rather than
// act on its stale copy until the stream happens to name them.
func (f *Follower) Return(exps []string) {
	f.mu.Lock()
	for _, id := range exps {
		f.exps[id] = true
	}
	f.mu.Unlock()
}

// Remind asks for these experiments at the next Take, and for that Take
// now: ones a caller chose to look at again later, from a timer.
func (f *Follower) Remind(exps []string) {
	f.Return(exps)
	f.poke()
}

// flushDeferred names the held mirror changes' experiments (DeferMirrors).
func (f *Follower) flushDeferred() {
	f.mu.Lock()
	ids := make([]string, 0, len(f.deferred))
	for id := range f.deferred {
		ids = append(ids, id)
	}
	clear(f.deferred)
	f.deferTimer = false
	f.mu.Unlock()
	f.Remind(ids)
}

func (f *Follower) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *Follower) run(ctx context.Context, jobs falconv1.JobServiceClient, log *slog.Logger) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		f.mu.Lock()
		req := &falconv1.WatchChangesRequest{Epoch: f.epoch, Since: f.seq}
		f.streams++
		f.mu.Unlock()
		stream, err := jobs.WatchChanges(ctx, req)
		if err == nil {
			for {
				var c *falconv1.Change
				if c, err = stream.Recv(); err != nil {
					break
				}
				backoff = 100 * time.Millisecond
				if f.note(c) {
					f.poke()
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
		log.Debug("change stream broken; resuming", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// note records c and reports whether the caller has something new to do.
// A derived change (the expController's own mirror of an experiment's
// jobs) is not news to anyone following: the job changes it follows from
// were noted already, and its writer knows what it wrote. Nor is the echo
// of the caller's own write (Skip).
func (f *Follower) note(c *falconv1.Change) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.GetKind() != "" && c.GetSeq() > f.seq {
		// Not the hello's: it names the latest change, and those before
		// it may still be on their way.
		f.seq = c.GetSeq()
	}
	if c.GetDerived() || f.self != "" && c.GetWriter() == f.self || f.skipSettled && c.GetSettled() {
		return false
	}
	if c.GetMirror() && f.deferMirrors > 0 && c.GetExpId() != "" {
		f.deferred[c.GetExpId()] = true
		if !f.deferTimer {
			f.deferTimer = true
			time.AfterFunc(f.deferMirrors, f.flushDeferred)
		}
		return false
	}
	switch c.GetKind() {
	case "":
		// The hello: a new epoch means a server we have not followed, so
		// whatever it wrote before now is unknown to us. That holds for
		// the first connection too: a caller whose first Take (a resync)
		// came before the hello read the store before this stream
		// carried anything, and a change landing in between would be
		// on neither, so it reads everything once more.
		if !f.hello {
			f.hello = true
			close(f.connected)
		}
		if c.GetEpoch() != f.epoch {
			f.resync = true
			f.epoch, f.seq = c.GetEpoch(), c.GetSeq()
		}
		return true
	case "resync":
		f.resync = true
	case "cluster":
		// A cluster changed: every waiting job may be placed differently.
		f.resync = true
	default:
		if id := c.GetExpId(); id != "" {
			f.exps[id] = true
		}
	}
	return true
}
