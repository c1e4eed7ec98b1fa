package resourcemanager

import (
	"context"
	"slices"
	"sync"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
)

// ends records a Running job's success the moment its backend reports it,
// without waiting for a cycle: under load the cycle in flight and the
// writes queued before the job's own took most of the time between a
// Kubernetes Job completing and its experiment showing Succeeded.
//
// The cycle arms it with every Running job it looked at (armEnds). When a
// backend reports a change of one (Touch), ends asks the backend what the
// job's pods do (Observe, from the informer's cache); if planRunningObserved
// records it Succeeded, it writes that at once, conditional on Running as
// every write of the manager is, and leaves the row it wrote for the next
// cycle to fold into the snapshot (take). Only success goes this way: a
// failure stops the job's other pods or slices first (stopThenRecord),
// which is the cycle's to do, and a job that still runs has nothing to
// record here.
//
// On a cluster whose backend manages pools the ended job's Kubernetes Job
// is then removed (cleanUp), as the cycle would, and its pool falls free
// when the row is folded: the cycle that folds it decides where the pool
// goes. Until then a job that would create a pool of the same shape waits
// for that one instead (await), and is looked at once the row is there to
// fold.
//
// It is safe because the write is conditional: an abort that landed first
// wins (the write is refused and the job's experiment read again), and a
// cycle that looks at the same job meanwhile and records the same end loses
// its own write the same way. The cycle leaves alone a job whose end is
// being written or waits to be folded (busy). Nothing of it needs to
// survive a restart: the row is the truth, and a job whose end was not
// written is still Running, observed by the first cycle (see memory); a
// Kubernetes Job whose removal was lost is swept on a resync, as any
// ended job's leftovers are.
type ends struct {
	r  recorder
	mu sync.Mutex
	// running is each Running job the cycle armed, by ID.
	running map[string]*ending
	// written is each row ends wrote, by ID, for the next cycle to fold.
	written map[string]*falconv1.Job
	// ctx is Run's; nil until Run opens ends, so a bare Reconcile records
	// every end itself.
	ctx    context.Context
	closed bool
	wg     sync.WaitGroup
}

// ending is one armed Running job.
type ending struct {
	endLook // what the next look uses
	looking // the look in flight, if any
	// writing: its end is being recorded, and arm leaves it alone.
	writing bool
	// waiters are the jobs to look at once the write is over: they wait
	// for the pool this job leaves (await).
	waiters []string
}

// endLook is what a look at an armed job uses. arm replaces it and never
// changes one, so a look owns the one it took: its job is a copy of the
// cycle's, which the look's write may refresh.
type endLook struct {
	job     *falconv1.Job // as the cycle last saw it
	cluster *falconv1.Cluster
	backend Backend
}

// recorder is what ends asks of the manager.
type recorder interface {
	// succeededNow says whether the job ended in success, and what is to
	// be recorded of it (its message, when it ended).
	succeededNow(ctx context.Context, x endLook) (d decision, ok bool)
	// recordEnd writes that end and returns the row it wrote (nil if it
	// did not land) and what is to follow once the row is handed over
	// (nil if nothing).
	recordEnd(ctx context.Context, x endLook, d decision) (row *falconv1.Job, then func())
	// looked asks for a cycle that looks at id: one whose look is over,
	// a row recorded there to take, or one that awaited it.
	looked(id string)
}

func newEnds(r recorder) *ends {
	return &ends{r: r, running: map[string]*ending{}, written: map[string]*falconv1.Job{}}
}

// open lets ends record, under Run's context.
func (e *ends) open(ctx context.Context) {
	e.mu.Lock()
	e.ctx = ctx
	e.mu.Unlock()
}

// arm watches j, which the cycle saw Running on cl. Ends not open, or
// closed, watches nothing.
func (e *ends) arm(j *falconv1.Job, cl *falconv1.Cluster, b Backend) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ctx == nil || e.closed {
		return
	}
	look := endLook{job: cloneJob(j), cluster: cl, backend: b}
	if x := e.running[j.GetId()]; x != nil {
		if !x.writing {
			x.endLook = look
		}
		return
	}
	e.running[j.GetId()] = &ending{endLook: look}
}

// drop stops watching id: the cycle saw it leave Running. A write in
// flight still lands or not; its row is folded as any other.
func (e *ends) drop(id string) {
	e.mu.Lock()
	delete(e.running, id)
	e.mu.Unlock()
}

// busy reports whether id's end is being written, or was and waits to be
// folded: the cycle leaves the job alone until then.
func (e *ends) busy(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.written[id]; ok {
		return true
	}
	x := e.running[id]
	return x != nil && x.writing
}

// await reports whether id's end is being written, or was and waits to be
// folded, and if so has waiter looked at once the row is there to fold:
// when the write is over, or at once if it is over already (the cycle
// that folds the row is asked for then).
func (e *ends) await(id, waiter string) bool {
	e.mu.Lock()
	if _, ok := e.written[id]; ok {
		e.mu.Unlock()
		e.r.looked(waiter)
		return true
	}
	defer e.mu.Unlock()
	x := e.running[id]
	if x == nil || !x.writing {
		return false
	}
	if !slices.Contains(x.waiters, waiter) {
		x.waiters = append(x.waiters, waiter)
	}
	return true
}

// take returns the rows written since the last take.
func (e *ends) take() []*falconv1.Job {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.written) == 0 {
		return nil
	}
	out := make([]*falconv1.Job, 0, len(e.written))
	for _, j := range e.written {
		out = append(out, j)
	}
	clear(e.written)
	return out
}

// touched starts a look at the armed jobs among ids and returns the
// others, which are the cycle's. A look asks the recorder whether the job
// succeeded and, if so, records it (at most once per job); it then has the
// job looked at, a row recorded there to take, and each job that awaited
// it: the cycle folds the row, or looks at a job that did not succeed as
// it would have without ends.
func (e *ends) touched(ids []string) (rest []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		x := e.running[id]
		if x == nil || e.closed || x.writing {
			rest = append(rest, id)
			continue
		}
		if !x.start() {
			continue
		}
		ctx := e.ctx
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if then := e.look(ctx, id, x); then != nil {
				then()
			}
		}()
	}
	return rest
}

// look is one look at x, armed as id, until it records an end or finds
// nothing more to look at. It returns what is to follow a recorded end.
func (e *ends) look(ctx context.Context, id string, x *ending) func() {
	e.mu.Lock()
	for {
		look := x.endLook
		e.mu.Unlock()
		d, succeeded := e.r.succeededNow(ctx, look)
		e.mu.Lock()
		if e.running[id] != x || e.closed {
			e.mu.Unlock()
			e.r.looked(id)
			return nil // dropped meanwhile: the cycle has it
		}
		if succeeded {
			x.writing = true
			e.mu.Unlock()
			row, then := e.r.recordEnd(ctx, look, d)
			e.mu.Lock()
			if e.running[id] == x {
				delete(e.running, id)
			}
			if row != nil {
				e.written[id] = row
			} else {
				then = nil
			}
			waiters := x.waiters
			x.waiters = nil
			e.mu.Unlock()
			e.r.looked(id)
			for _, w := range waiters {
				e.r.looked(w)
			}
			return then
		}
		if !x.more() {
			e.mu.Unlock()
			e.r.looked(id)
			return nil
		}
	}
}

// close stops every look from recording and waits for those in flight.
func (e *ends) close() {
	e.mu.Lock()
	e.closed = true
	clear(e.running)
	e.mu.Unlock()
	e.wg.Wait()
}

// succeededNow asks the backend whether the job succeeded, and what is to
// be recorded of it (ends' look, outside any cycle).
func (m *Manager) succeededNow(ctx context.Context, x endLook) (decision, bool) {
	obs, err := x.backend.Observe(ctx, x.cluster, x.job)
	if err != nil {
		return decision{}, false
	}
	d := planRunningObserved(obs)
	return d, d.to == lifecycle.Succeeded
}

// recordEnd writes the job Succeeded, conditional on Running; the look's
// own copy becomes the row written (see endLook). What follows is the
// removal of its Kubernetes Job where pools are shared (cleanUp), as when
// the cycle records an end.
func (m *Manager) recordEnd(ctx context.Context, x endLook, d decision) (*falconv1.Job, func()) {
	j := x.job
	req := d.request(j)
	req.ExpectedStatus = string(lifecycle.Running)
	if !m.write(ctx, j, req) {
		return nil, nil
	}
	m.metrics.EndsAhead.Inc()
	return j, func() { m.cleanUp(ctx, x.cluster, x.backend, j) }
}

// looked asks for a cycle that folds id's written end, or looks at the
// job as at any reported one if ends recorded nothing.
func (m *Manager) looked(id string) {
	m.touchMu.Lock()
	m.touched[id] = true
	m.touchMu.Unlock()
	m.poke()
}
