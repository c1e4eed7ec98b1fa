package sim

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// maxCycles bounds the cycles at one instant: a cycle that keeps changing
// something at the same moment is a livelock, in the simulator or in the
// rules it drives.
const maxCycles = 50

// pool is one simulated node pool, with its whole history.
type pool struct {
	cluster     *cluster
	name        string
	shape       queue.Pool
	nodes       int
	createdFor  *job
	requested   time.Time
	readyAt     time.Time
	deletingAt  time.Time // zero until its deletion starts
	goneAt      time.Time
	reservation bool
	runs        []*job
}

// listed reports whether a listing made at `at` shows the pool.
func (p *pool) listed(at time.Time) bool { return !p.requested.After(at) && !p.gone(at) }

func (p *pool) deleting(at time.Time) bool { return !p.deletingAt.IsZero() && !at.Before(p.deletingAt) }
func (p *pool) gone(at time.Time) bool     { return !p.goneAt.IsZero() && !at.Before(p.goneAt) }

// state is what a listing made at `at` says of the pool.
func (p *pool) state(at time.Time) lifecycle.PoolState {
	switch {
	case p.deleting(at):
		return lifecycle.PoolDeleting
	case !at.Before(p.readyAt):
		return lifecycle.PoolReady
	}
	return lifecycle.PoolProvisioning
}

// deleteState is the manager's memory of one pool's deletion.
type deleteState struct {
	next     time.Time
	interval time.Duration
	attempts int
}

// cluster is one simulated cluster and the manager's memory of it.
type cluster struct {
	cfg    Cluster
	rng    *rand.Rand
	alive  []*pool // not yet gone
	byName map[string]*pool
	// The manager's view: the pool listing (as of listAt), who owns each
	// pool, the deletions it started, and since when each pool is idle.
	listed    map[string]resourcemanager.Pool
	sorted    []resourcemanager.Pool // listed, oldest first; nil once listed changes
	listAt    time.Time
	listValid bool
	owner     map[string]string
	deletes   map[string]*deleteState
	idleSince map[string]time.Time
	demand    map[queue.Pool]int // jobs waiting in its queues, by shape
	running   int
	// acc is the cluster's offer as selection reads it (priorities
	// negated: higher is preferred), the same at every cycle.
	acc map[string]int
	// gen counts the changes of what PlanPools reads of the cluster (its
	// listing, owners and demand), so that a plan is made again only when
	// one of them changed or a deadline of the last plan came (plan).
	gen       uint64
	plan      poolPlan
	decisions []resourcemanager.PoolDecision // the last plan's, its slice reused
	forgotGen uint64
	// free counts the listed pools no job owns, by shape, as of freeGen:
	// where it says none, the reuse rule has nothing to find.
	free    map[queue.Pool]freeCount
	freeGen uint64
	freeOK  bool
	// poolGen counts the creates and deletes (the moments a pool turns
	// ready or goes away are fixed by them); nowEvent and listEvent are
	// the first such moments after now and after the listing.
	poolGen             uint64
	nowEvent, listEvent eventMemo
}

type freeCount struct{ ready, any int }

// poolPlan is the last PlanPools answer for a cluster: the decisions, the
// gen they were made at, and until when they hold. PlanPools is a function
// of its facts, and of the time only through a pool's grace or linger
// ending (each such pool's Deadline), so the same facts before the first
// deadline give the same decisions.
type poolPlan struct {
	made  bool
	gen   uint64
	until time.Time // the first Deadline; zero: none
	// deletes are the decisions to delete, which are acted on again at
	// each cycle (a deletion refused or not yet due is retried).
	deletes []resourcemanager.Pool
}

func (c *cluster) touch() { c.gen++ }

type phase int

const (
	arriving phase = iota
	waiting
	provisioning // holds its queue's slot, its pool being created
	capped       // holds its queue's slot, waiting for a pool under the cap
	running
	done
)

// job is one trace job in the simulation.
type job struct {
	idx      int
	id       string
	tj       *Job
	sj       queue.Job
	shape    queue.Pool
	phase    phase
	cluster  *cluster
	pool     *pool
	pollNext time.Time
	pollInt  time.Duration
	placed   time.Time // picked from its queue
	start    time.Time
	end      time.Time
	key      queue.Key
}

type endHeap []*job

func (h endHeap) Len() int { return len(h) }
func (h endHeap) Less(a, b int) bool {
	if !h[a].end.Equal(h[b].end) {
		return h[a].end.Before(h[b].end)
	}
	return h[a].idx < h[b].idx
}
func (h endHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *endHeap) Push(x any)   { *h = append(*h, x.(*job)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// run is one simulation of a trace under one policy.
type run struct {
	cfg      Config
	policy   Policy
	now      time.Time
	wake     time.Time
	sched    *queue.Scheduler
	clusters []*cluster
	byName   map[string]*cluster
	jobs     []*job
	byID     map[string]*job
	arrived  []*job // not yet placed in a queue
	acquire  []*job // holding a slot, by trace order
	scratch  []*job // a copy of acquire for one cycle, kept to save allocations
	ends     endHeap
	pools    []*pool
	depth    map[queue.Key]*depthStat
	cycles   int
	instants int
	// readyNone: the scheduler had no queue with a free slot and a
	// waiting job when last asked, and nothing was enqueued, picked or
	// removed since, so asking again would say the same.
	readyNone bool
}

// depthStat is one queue's depth over time.
type depthStat struct {
	area time.Duration // waiting jobs × time
	peak int
	cur  int
}

// Simulate runs trace through the controller's rules under policy against
// cfg's clusters. The same inputs and seed give the same result.
func Simulate(trace []Job, cfg Config, policy Policy, seed uint64) (*Result, error) {
	if len(trace) == 0 {
		return nil, errors.New("the trace has no jobs")
	}
	if err := cfg.Check(trace); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, policy: policy, byName: map[string]*cluster{}, byID: make(map[string]*job, len(trace)), depth: map[queue.Key]*depthStat{}}
	r.now = trace[0].T
	r.sched = queue.New(queue.WithClock(func() time.Time { return r.now }))
	for _, c := range cfg.Clusters {
		h := fnv.New64a()
		h.Write([]byte(c.Name))
		cl := &cluster{cfg: c, rng: rand.New(rand.NewPCG(seed, h.Sum64())), byName: map[string]*pool{},
			owner: map[string]string{}, deletes: map[string]*deleteState{}, idleSince: map[string]time.Time{}, demand: map[queue.Pool]int{},
			acc: map[string]int{}, listed: map[string]resourcemanager.Pool{}}
		for t, prio := range c.Accelerators {
			cl.acc[t] = -prio
		}
		r.clusters = append(r.clusters, cl)
		r.byName[c.Name] = cl
	}
	r.jobs = make([]*job, len(trace))
	for i := range trace {
		tj := &trace[i]
		j := &job{idx: i, id: fmt.Sprintf("job-%07d", i), tj: tj, shape: queue.Pool{AcceleratorType: tj.Accelerator, Topology: tj.Topology}}
		j.sj = queue.Job{ID: j.id, Actor: tj.User, Name: fmt.Sprintf("%s-%d", tj.User, i), AcceleratorType: tj.Accelerator,
			Topology: tj.Accelerator + ":" + tj.Topology, Shape: tj.Topology, PinnedCluster: tj.Cluster, Created: tj.T}
		r.jobs[i] = j
		r.byID[j.id] = j
	}
	if err := r.loop(); err != nil {
		return nil, err
	}
	return r.result(), nil
}

// at notes a moment the manager must be looked at again.
func (r *run) at(t time.Time) {
	if t.After(r.now) && (r.wake.IsZero() || t.Before(r.wake)) {
		r.wake = t
	}
}

func (r *run) loop() error {
	next, ended := 0, 0
	for {
		r.instants++
		for next < len(r.jobs) && !r.jobs[next].tj.T.After(r.now) {
			r.jobs[next].phase = waiting
			r.arrived = append(r.arrived, r.jobs[next])
			next++
		}
		r.wake = time.Time{}
		for i := 0; ; i++ {
			if i == maxCycles {
				return fmt.Errorf("policy %s: at %s the cycle still changes something after %d cycles (livelock)", r.policy.Name, r.now.Format(time.RFC3339), i)
			}
			r.cycles++
			changed, n := r.cycle()
			ended += n
			if !changed {
				break
			}
		}
		if ended == len(r.jobs) && r.poolsAlive() == 0 {
			return nil
		}
		for _, c := range r.clusters {
			c.prune(r.now)
		}
		if next < len(r.jobs) {
			r.at(r.jobs[next].tj.T)
		}
		if len(r.ends) > 0 {
			r.at(r.ends[0].end)
		}
		for _, c := range r.clusters {
			r.listingWake(c)
		}
		if r.wake.IsZero() {
			return fmt.Errorf("policy %s: stuck at %s: %d of %d jobs ended, %d pools alive, %d jobs waiting to be placed",
				r.policy.Name, r.now.Format(time.RFC3339), ended, len(r.jobs), r.poolsAlive(), len(r.arrived))
		}
		for _, d := range r.depth {
			d.area += time.Duration(d.cur) * r.wake.Sub(r.now)
		}
		r.now = r.wake
	}
}

// prune drops the pools no listing can show again: gone by the time of
// the cluster's current listing (every later listing is at that time or
// after it), or by now when it has none yet. Without it every instant would
// walk every pool the run ever created.
func (c *cluster) prune(now time.Time) {
	since := now
	if c.listValid {
		since = c.listAt
	}
	kept := c.alive[:0]
	for _, p := range c.alive {
		if !p.gone(since) {
			kept = append(kept, p)
		}
	}
	clear(c.alive[len(kept):])
	c.alive = kept
}

func (r *run) poolsAlive() int {
	n := 0
	for _, c := range r.clusters {
		kept := c.alive[:0]
		for _, p := range c.alive {
			if !p.gone(r.now) {
				kept = append(kept, p)
			}
		}
		if len(kept) < len(c.alive) {
			// Pools gone by now, which a listing made earlier still
			// shows: they no longer count for its wake-up either.
			c.poolGen++
		}
		c.alive = kept
		n += len(kept)
	}
	return n
}

// cycle is one Reconcile, its phases in the manager's order. It reports
// whether it changed anything (the harness's writes or cluster calls), and
// how many jobs ended.
func (r *run) cycle() (changed bool, ended int) {
	// 1. The pool listings and the candidates selection reads (only
	// when a job is to be placed: the facts are those of this moment,
	// before step 3 changes owners).
	for _, c := range r.clusters {
		r.list(c)
	}
	var cands []queue.Cluster
	if len(r.arrived) > 0 {
		cands = make([]queue.Cluster, len(r.clusters))
		for i, c := range r.clusters {
			qc := queue.Cluster{Name: c.cfg.Name, Active: true, Accelerators: c.acc, MaxQueueDepth: c.cfg.MaxQueueDepth,
				IdlePools: map[queue.Pool]int{},
				Probe:     &queue.Probe{Reachable: true, RunningCount: c.running, ProbedAt: r.now}}
			for _, p := range c.listed {
				if p.State == lifecycle.PoolReady && c.owner[p.Name] == "" {
					qc.IdlePools[queue.Pool{AcceleratorType: p.AcceleratorType, Topology: p.Topology}]++
				}
			}
			cands[i] = qc
		}
	}
	// 3. Acquiring jobs: a ready idle pool of the shape, else the poll.
	r.scratch = append(r.scratch[:0], r.acquire...)
	for _, j := range r.scratch {
		if (j.phase == provisioning || j.phase == capped) && r.advance(j) {
			changed = true
		}
	}
	clear(r.scratch)
	// 4. Place the jobs that arrived.
	left := r.arrived[:0]
	for _, j := range r.arrived {
		key, _, err := r.sched.EnqueueExplained(j.sj, cands, r.policy.Selection)
		if err != nil {
			left = append(left, j) // unplaceable for now (a full queue): again next cycle
			continue
		}
		r.readyNone = false
		j.key, j.cluster = key, r.byName[key.Cluster]
		j.cluster.demand[j.shape]++
		j.cluster.touch()
		r.depthOf(key).add(1)
	}
	r.arrived = left
	// 5. Every free slot to the next job; a job that reuses a ready pool
	// runs at once and frees its slot for the next round.
	for progress := true; progress; {
		progress = false
		var picked []*job
		var ready []queue.Key
		if !r.readyNone {
			ready = r.sched.Ready()
			r.readyNone = len(ready) == 0
		}
		for _, key := range ready {
			r.readyNone = false
			sj, ok := r.sched.Pick(key)
			if !ok {
				continue
			}
			j := r.byID[sj.ID]
			j.cluster.demand[j.shape]--
			j.cluster.touch()
			r.depthOf(key).add(-1)
			j.placed = r.now
			picked = append(picked, j)
		}
		for _, j := range picked {
			changed = true
			if r.pick(j) {
				progress = true
			}
		}
	}
	// 7. Running jobs whose run is over.
	for len(r.ends) > 0 && !r.ends[0].end.After(r.now) {
		j := heap.Pop(&r.ends).(*job)
		j.phase = done
		j.cluster.running--
		delete(j.cluster.owner, j.pool.name)
		j.cluster.touch()
		changed = true
		ended++
	}
	// 8. Node pools: keep what a waiting job can use, delete the rest.
	for _, c := range r.clusters {
		if r.release(c) {
			changed = true
		}
		r.forget(c)
	}
	return changed, ended
}

func (r *run) depthOf(k queue.Key) *depthStat {
	d := r.depth[k]
	if d == nil {
		d = &depthStat{}
		r.depth[k] = d
	}
	return d
}

func (d *depthStat) add(n int) {
	d.cur += n
	d.peak = max(d.peak, d.cur)
}

// list refreshes a cluster's listing as the manager does: after its own
// creates and deletes, else once ListEvery has passed. The manager runs a
// cycle at every ListEvery deadline, so a listing due at several of them
// since the last is the world as of the latest.
func (r *run) list(c *cluster) {
	every := r.cfg.Timing.ListEvery
	if c.listValid && every > 0 && r.now.Before(c.listAt.Add(every)) {
		return
	}
	at := r.now
	if c.listValid && every > 0 {
		at = c.listAt.Add(r.now.Sub(c.listAt) / every * every)
		if !c.changesBetween(c.listAt, at) {
			c.listAt = at // the same pools in the same states
			return
		}
	}
	// The listing is updated in place: most entries read as they did,
	// and a new map would allocate every entry again.
	c.listAt, c.listValid = at, true
	var names, states bool // pools came or went; pools changed state
	n := 0
	for _, p := range c.alive {
		if !p.listed(at) {
			continue
		}
		n++
		lp := resourcemanager.Pool{Name: p.name, AcceleratorType: p.shape.AcceleratorType, Topology: p.shape.Topology,
			Nodes: int64(p.nodes), State: p.state(at), CreatedAt: p.requested, CreatedFor: p.createdFor.id}
		switch old, ok := c.listed[p.name]; {
		case !ok:
			names = true
			c.listed[p.name] = lp
		case old != lp:
			states = true
			c.listed[p.name] = lp
		}
	}
	if n != len(c.listed) {
		// Pools gone: those no longer alive are gone by at (prune drops
		// only those).
		for name := range c.listed {
			if p := c.byName[name]; p == nil || !p.listed(at) {
				delete(c.listed, name)
			}
		}
		names = true
	}
	switch {
	case names:
		c.sorted = nil
	case states:
		// The same pools in new states: the order (by creation time and
		// name) holds, so only the entries change.
		for i := range c.sorted {
			c.sorted[i] = c.listed[c.sorted[i].Name]
		}
	default:
		return // it reads as the last did: its order and plan still hold
	}
	c.touch()
}

// changesBetween reports whether a listing made at to could read
// differently from the valid one made at from: only a pool turning ready
// or going away can change it (a create or a delete invalidates the
// listing, so every pool alive was requested, and every deletion begun,
// by from).
func (c *cluster) changesBetween(from, to time.Time) bool {
	first := c.firstEventAfter(&c.listEvent, from)
	return !first.IsZero() && !first.After(to)
}

// listingWake notes when each of the cluster's pools turns ready or goes
// away, and the first ListEvery deadline at which the cluster's listing
// would read differently: only then can a refresh change a decision, so
// the cycles between need not run.
func (r *run) listingWake(c *cluster) {
	r.at(c.firstEventAfter(&c.nowEvent, r.now))
	every := r.cfg.Timing.ListEvery
	if !c.listValid || every <= 0 {
		return
	}
	first := c.firstEventAfter(&c.listEvent, c.listAt)
	if first.IsZero() {
		return
	}
	k := (first.Sub(c.listAt) + every - 1) / every
	r.at(c.listAt.Add(k * every))
}

// eventMemo is the answer of firstEventAfter for a time from.
type eventMemo struct {
	ok         bool
	gen        uint64
	from, next time.Time
}

// firstEventAfter is the first moment after t at which one of the
// cluster's pools turns ready or goes away (zero: none). Those moments
// are fixed once a pool is created or deleted (poolGen), so the answer
// for from holds for any later t before it: m remembers it, and most
// instants ask again without walking the pools.
func (c *cluster) firstEventAfter(m *eventMemo, t time.Time) time.Time {
	if m.ok && m.gen == c.poolGen && !t.Before(m.from) && (m.next.IsZero() || t.Before(m.next)) {
		return m.next
	}
	var first time.Time
	for _, p := range c.alive {
		if x := p.readyAt; x.After(t) && (first.IsZero() || x.Before(first)) {
			first = x
		}
		if x := p.goneAt; x.After(t) && (first.IsZero() || x.Before(first)) {
			first = x
		}
	}
	*m = eventMemo{ok: true, gen: c.poolGen, from: t, next: first}
	return first
}

// reusable is the manager's takeIdle: resourcemanager.ReusablePool over
// the listing, skipping pools whose deletion the manager started.
func (r *run) reusable(c *cluster, shape queue.Pool) (resourcemanager.Pool, bool) {
	if r.policy.NoReuse {
		return resourcemanager.Pool{}, false
	}
	if !c.freeOK || c.freeGen != c.gen {
		if c.free == nil {
			c.free = map[queue.Pool]freeCount{}
		}
		clear(c.free)
		for _, p := range c.listed {
			if c.owner[p.Name] != "" {
				continue
			}
			k := queue.Pool{AcceleratorType: p.AcceleratorType, Topology: p.Topology}
			n := c.free[k]
			switch p.State {
			case lifecycle.PoolReady:
				n.ready++
				n.any++
			case lifecycle.PoolProvisioning:
				n.any++
			}
			c.free[k] = n
		}
		c.freeGen, c.freeOK = c.gen, true
	}
	if c.free[shape].any == 0 {
		// Counts ignore the pools being deleted, so they can only say
		// there may be one; none is none.
		return resourcemanager.Pool{}, false
	}
	return resourcemanager.ReusablePool(c.listed, c.owner, shape, func(name string) bool { _, ok := c.deletes[name]; return ok })
}

// assign makes p j's pool.
func (r *run) assign(j *job, p *pool) {
	if j.pool != nil {
		delete(j.cluster.owner, j.pool.name)
	}
	j.pool = p
	j.cluster.owner[p.name] = j.id
	j.cluster.touch()
}

// pollFirst starts polling a provisioning job's pool.
func (r *run) pollFirst(j *job) {
	j.phase = provisioning
	j.pollInt = r.cfg.Timing.PollInitial
	j.pollNext = r.now.Add(j.pollInt)
	r.at(j.pollNext)
}

// dispatch runs j on its pool, which is ready: its pods run at once, so
// its slot goes to the next job.
func (r *run) dispatch(j *job) {
	j.phase = running
	j.start, j.end = r.now, r.now.Add(j.tj.Duration)
	j.pool.runs = append(j.pool.runs, j)
	j.cluster.running++
	heap.Push(&r.ends, j)
	_ = r.sched.Remove(j.id)
	r.readyNone = false
	for i, a := range r.acquire {
		if a == j {
			r.acquire = append(r.acquire[:i], r.acquire[i+1:]...)
			break
		}
	}
}

// pick is acquirePool for a job just handed its slot: reuse a ready idle
// pool (and run), take over one still being created, or create its own.
// It reports whether the slot is free again.
func (r *run) pick(j *job) bool {
	c := j.cluster
	if p, ok := r.reusable(c, j.shape); ok {
		r.assign(j, c.byName[p.Name])
		if p.State == lifecycle.PoolReady {
			r.dispatch(j)
			return true
		}
		r.insertAcquiring(j)
		r.pollFirst(j)
		return false
	}
	if r.policy.Cap > 0 && r.poolsOf(c, j.shape) >= r.policy.Cap {
		// At the cap: wait for one of the shape's pools to fall free,
		// counted as demand so that it is kept for this job.
		j.phase = capped
		c.demand[j.shape]++
		c.touch()
		r.insertAcquiring(j)
		return false
	}
	r.assign(j, r.create(c, j))
	c.listValid = false // the manager lists again after a create
	c.touch()
	r.insertAcquiring(j)
	r.pollFirst(j)
	return false
}

// poolsOf is the manager's poolsOfShape: the listed pools of shape that
// can still serve a job and whose deletion it has not started.
func (r *run) poolsOf(c *cluster, shape queue.Pool) int {
	n := 0
	for name, p := range c.listed {
		if p.AcceleratorType == shape.AcceleratorType && p.Topology == shape.Topology && p.State.Usable() {
			if _, deleting := c.deletes[name]; !deleting {
				n++
			}
		}
	}
	return n
}

func (r *run) insertAcquiring(j *job) {
	i := sort.Search(len(r.acquire), func(i int) bool { return r.acquire[i].idx > j.idx })
	r.acquire = append(r.acquire, nil)
	copy(r.acquire[i+1:], r.acquire[i:])
	r.acquire[i] = j
}

// advance is acquirePool for a job whose pool is being created: a ready
// idle pool of its shape that fell free meanwhile wins; otherwise its own
// is checked when its poll is due. It reports whether the job now runs.
func (r *run) advance(j *job) bool {
	c := j.cluster
	if j.phase == capped {
		p, ok := r.reusable(c, j.shape)
		switch {
		case ok:
			c.demand[j.shape]--
			r.assign(j, c.byName[p.Name])
			if p.State == lifecycle.PoolReady {
				r.dispatch(j)
				return true
			}
			r.pollFirst(j)
			return false
		case r.poolsOf(c, j.shape) < r.policy.Cap:
			c.demand[j.shape]--
			r.assign(j, r.create(c, j))
			c.listValid = false
			c.touch()
			r.pollFirst(j)
		}
		return false
	}
	if p, ok := r.reusable(c, j.shape); ok && p.State == lifecycle.PoolReady {
		r.assign(j, c.byName[p.Name])
		r.dispatch(j)
		return true
	}
	if r.now.Before(j.pollNext) {
		r.at(j.pollNext)
		return false
	}
	if !r.now.Before(j.pool.readyAt) && !j.pool.deleting(r.now) {
		r.dispatch(j)
		return true
	}
	j.pollInt = min(2*j.pollInt, r.cfg.Timing.PollMax)
	j.pollNext = r.now.Add(j.pollInt)
	r.at(j.pollNext)
	return false
}

// create is the cluster creating a pool for j: from the reservation while
// it has room for the slice (000 section 5), else flex-start, which may
// find no capacity at first (a stockout).
func (r *run) create(c *cluster, j *job) *pool {
	p := &pool{cluster: c, name: "falcon-" + j.id, shape: j.shape, nodes: j.tj.Hosts, createdFor: j, requested: r.now}
	lat := j.tj.PoolCreate
	if lat == 0 {
		span := int64(c.cfg.PoolCreateMax - c.cfg.PoolCreateMin)
		lat = c.cfg.PoolCreateMin
		if span > 0 {
			lat += time.Duration(c.rng.Int64N(span/int64(time.Second)+1)) * time.Second
		}
	}
	if j.tj.SupplyMode != "flex-start" && r.reservationFree(c) >= p.nodes {
		p.reservation = true
	} else if c.cfg.Stockout > 0 && c.rng.Float64() < c.cfg.Stockout {
		lat += c.cfg.StockoutWait
	}
	p.readyAt = r.now.Add(lat)
	c.alive = append(c.alive, p)
	c.poolGen++
	c.byName[p.name] = p
	r.pools = append(r.pools, p)
	return p
}

func (r *run) reservationFree(c *cluster) int {
	free := c.cfg.ReservationNodes
	for _, p := range c.alive {
		if p.reservation && !p.gone(r.now) {
			free -= p.nodes
		}
	}
	return free
}

// release is the manager's releasePools for one cluster: PlanPools over
// the listing, then the deletions it asks for. The plan is made again only
// when the facts it reads changed or one of its deadlines came; otherwise
// the last one is acted on again, which is what a new one would say.
func (r *run) release(c *cluster) bool {
	if len(c.listed) == 0 {
		return false
	}
	if pl := &c.plan; pl.made && pl.gen == c.gen && (pl.until.IsZero() || r.now.Before(pl.until)) {
		// Acting on the same decisions again: the owned, kept and
		// idle-since bookkeeping was done when they were made; the
		// deadlines are noted again (each instant starts without), and
		// the deletions are tried again.
		r.at(pl.until)
		changed := false
		for _, p := range pl.deletes {
			if r.delete(c, p) {
				changed = true
			}
		}
		return changed
	}
	if c.sorted == nil {
		// Oldest first, by name among equals: the manager's order
		// (pools.go). Kept until the listing changes: most cycles read
		// the same one.
		c.sorted = make([]resourcemanager.Pool, 0, len(c.listed))
		for _, p := range c.listed {
			c.sorted = append(c.sorted, p)
		}
		slices.SortFunc(c.sorted, func(a, b resourcemanager.Pool) int {
			return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.Name, b.Name))
		})
	}
	pools := c.sorted
	var idle map[string]time.Time
	if r.policy.Linger > 0 {
		idle = c.idleSince
	}
	c.decisions = resourcemanager.AppendPoolPlan(c.decisions[:0], resourcemanager.PoolFacts{
		Pools: pools, Owner: c.owner, Demand: c.demand, Now: r.now, Grace: r.cfg.Timing.Grace,
		NoReuse: r.policy.NoReuse, Linger: r.policy.Linger, IdleSince: idle,
	})
	// The gen the plan was made at: deletions below change the listing
	// (and so gen), after which the next cycle plans again.
	c.plan = poolPlan{made: true, gen: c.gen, deletes: c.plan.deletes[:0]}
	changed := false
	for _, d := range c.decisions {
		name := d.Pool.Name
		if d.Verb == resourcemanager.PoolOwned {
			delete(c.idleSince, name)
			continue
		}
		if _, ok := c.idleSince[name]; !ok {
			c.idleSince[name] = r.now
		}
		switch d.Verb {
		case resourcemanager.PoolKept:
			if st, ok := c.deletes[name]; ok && st.attempts == 0 {
				delete(c.deletes, name)
			}
			r.at(d.Deadline)
			if !d.Deadline.IsZero() && (c.plan.until.IsZero() || d.Deadline.Before(c.plan.until)) {
				c.plan.until = d.Deadline
			}
		case resourcemanager.PoolDelete:
			c.plan.deletes = append(c.plan.deletes, d.Pool)
			if r.delete(c, d.Pool) {
				changed = true
			}
		}
	}
	return changed
}

// delete is the manager's deletePool against the simulated cluster, which
// refuses while the pool is still being created (ErrPoolBusy).
func (r *run) delete(c *cluster, lp resourcemanager.Pool) bool {
	st := c.deletes[lp.Name]
	if st != nil && r.now.Before(st.next) {
		r.at(st.next)
		return false
	}
	if st == nil {
		st = &deleteState{interval: r.cfg.Timing.DeleteBackoffInitial}
		c.deletes[lp.Name] = st
	}
	p := c.byName[lp.Name]
	mutated := false
	switch {
	case p == nil || p.gone(r.now) || p.deleting(r.now):
	case r.now.Before(p.readyAt):
		st.next = r.now.Add(r.cfg.Timing.PollInitial) // not an attempt: the create still runs
		r.at(st.next)
		return false
	default:
		p.deletingAt, p.goneAt = r.now, r.now.Add(c.cfg.PoolDelete)
		c.poolGen++
		mutated = true
	}
	lp.State = lifecycle.PoolDeleting
	c.listed[lp.Name] = lp
	if i := slices.IndexFunc(c.sorted, func(p resourcemanager.Pool) bool { return p.Name == lp.Name }); i >= 0 {
		c.sorted[i] = lp // its place in the order is its creation's
	} else {
		c.sorted = nil
	}
	c.listValid = false
	c.touch()
	st.attempts++
	st.next = r.now.Add(st.interval)
	r.at(st.next)
	return mutated
}

// forget drops the memory of pools the listing no longer shows. Only a
// change of the listing (of gen) can give it something to drop.
func (r *run) forget(c *cluster) {
	if c.forgotGen == c.gen {
		return
	}
	c.forgotGen = c.gen
	for name := range c.deletes {
		if _, ok := c.listed[name]; !ok {
			delete(c.deletes, name)
			delete(c.idleSince, name)
		}
	}
	for name := range c.idleSince {
		if _, ok := c.listed[name]; !ok {
			delete(c.idleSince, name)
		}
	}
}
