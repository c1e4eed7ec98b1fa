package resourcemanager

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/placement"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// PoolTiming tunes how the manager drives node pools.
type PoolTiming struct {
	// ListEvery is how stale a cluster's pool list may be before it is
	// listed again (the manager's own creates and deletes refresh it).
	ListEvery time.Duration
	// PollInitial and PollMax bound the backoff between looks at a pool
	// being provisioned.
	PollInitial, PollMax time.Duration
	// Grace protects a pool no live job owns while it is young and still
	// provisioning: it may be one a controller created just before it
	// crashed, about to be adopted.
	Grace time.Duration
	// DeleteAttempts failed deletions make the manager note the failure on
	// the pool's last job; it keeps retrying at DeleteBackoffMax.
	DeleteAttempts                         int
	DeleteBackoffInitial, DeleteBackoffMax time.Duration
	// ReportEvery is how often each cluster's capacity view is reported.
	ReportEvery time.Duration
}

// DefaultPoolTiming suits GKE, where a pool takes minutes to create.
var DefaultPoolTiming = PoolTiming{
	ListEvery:   30 * time.Second,
	PollInitial: 5 * time.Second, PollMax: time.Minute,
	Grace:          10 * time.Minute,
	DeleteAttempts: 5, DeleteBackoffInitial: 10 * time.Second, DeleteBackoffMax: 5 * time.Minute,
	ReportEvery: 15 * time.Second,
}

// WithoutPoolReuse makes every job create a pool of its own and delete it
// when it ends: the naive policy, kept for comparison in benchmarks.
func WithoutPoolReuse() Option { return func(m *Manager) { m.noReuse = true } }

// WithPoolLinger keeps an idle Ready pool that no waiting job wants for up
// to d after its last job ended, instead of deleting it at once (000
// section 5's rule, the default, is d = 0): the "linger=DUR" policy of
// falcon sim, for traffic where another job of the shape usually arrives
// within d. A pool a waiting job wants is kept regardless, as always.
func WithPoolLinger(d time.Duration) Option { return func(m *Manager) { m.linger = max(d, 0) } }

// WithPoolCap bounds the node pools of one shape on a cluster at n (the
// "cap=N" policy of falcon sim; 0, the default, is 000's rule: no bound).
// A job picked while its cluster already has n pools of its shape, none of
// them free, holds its queue's slot as WaitingForPool and takes the first
// that falls free (kept for it, as for a waiting job), or creates its own
// once there are fewer: bursts queue behind busy pools instead of each
// creating one, trading waits for pool creations.
func WithPoolCap(n int) Option { return func(m *Manager) { m.poolCap = max(n, 0) } }

// WithPoolTiming replaces DefaultPoolTiming.
func WithPoolTiming(t PoolTiming) Option { return func(m *Manager) { m.poolTiming = t } }

// poolKey names a pool across clusters.
type poolKey struct{ cluster, pool string }

// poolListing is a cluster's pools as last listed, or why they could not
// be; a failure is retried no sooner than a success would be, so an
// unreachable cluster costs one call (and one warning) per ListEvery.
type poolListing struct {
	pools []Pool
	err   error
	at    time.Time
}

// backoff is the schedule of one retried action.
type backoff struct {
	since    time.Time // the first failure
	next     time.Time
	interval time.Duration
	attempts int
	lastErr  error
	noted    bool
}

// retrying starts the schedule of an action p paces, which first failed
// at now: its first wait is p.Initial (fail doubles the interval).
func retrying(p RetryPolicy, now time.Time) backoff {
	return backoff{since: now, interval: p.Initial / 2}
}

// fail records a try that failed at now and schedules the next: one more
// attempt, and the interval doubled, up to max.
func (b *backoff) fail(err error, now time.Time, max time.Duration) {
	b.attempts++
	b.lastErr = err
	b.interval = min(2*b.interval, max)
	b.next = now.Add(b.interval)
}

// poolCluster is one cycle's view of a cluster whose backend manages pools.
type poolCluster struct {
	cl    *falconv1.Cluster
	b     PoolBackend
	pools map[string]Pool
	owner map[string]string // pool -> the live job that owns it
	err   error             // listing failed: no pool decisions this cycle
}

// idle reports whether the pool is ready and no live job owns it.
func (pc *poolCluster) idle(p Pool) bool {
	return p.State == lifecycle.PoolReady && pc.owner[p.Name] == ""
}

// loadPools lists the pools of every pool-managed cluster and works out who
// owns each: the live job naming it in node_pool, or the live job it was
// created for when that job has not recorded it yet (a crash between the
// create and the write).
func (m *Manager) loadPools(ctx context.Context, c *cycle, jobs []*falconv1.Job) {
	c.pools = map[string]*poolCluster{}
	for name, cl := range c.clusters {
		b, ok := m.backends[cl.GetBackend()].(PoolBackend)
		if !ok {
			continue
		}
		pc := &poolCluster{cl: cl, b: b, pools: map[string]Pool{}}
		c.pools[name] = pc
		lst, ok := m.mem.poolLists[name]
		if !ok || m.now().Sub(lst.at) >= m.poolTiming.ListEvery {
			pools, err := b.ListPools(ctx, cl)
			if err != nil {
				m.log.Warn("list node pools", "cluster", name, "err", err)
			}
			lst = poolListing{pools: pools, err: err, at: m.now()}
			m.mem.poolLists[name] = lst
		}
		if m.poolTiming.ListEvery > 0 {
			c.deadline(lst.at.Add(m.poolTiming.ListEvery))
		}
		if lst.err != nil {
			pc.err = lst.err
			continue
		}
		for _, p := range lst.pools {
			pc.pools[p.Name] = p
		}
	}
	m.loadOwners(c, jobs)
}

// loadOwners works out who owns each pool from the jobs that are still
// live (statuses written this cycle included).
func (m *Manager) loadOwners(c *cycle, jobs []*falconv1.Job) {
	if len(c.pools) == 0 {
		return // no cluster here manages pools: nothing to own
	}
	live := map[string]*falconv1.Job{}
	for _, pc := range c.pools {
		pc.owner = map[string]string{}
	}
	for _, j := range jobs {
		if lifecycle.JobMachine.IsTerminal(lifecycle.Status(j.GetStatus())) {
			continue
		}
		live[j.GetId()] = j
		if pc := c.pools[j.GetClusterName()]; pc != nil && j.GetNodePool() != "" {
			pc.owner[j.GetNodePool()] = j.GetId()
			m.mem.lastOwner[poolKey{j.GetClusterName(), j.GetNodePool()}] = j.GetId()
		}
	}
	for _, pc := range c.pools {
		for _, p := range pc.pools {
			if j := live[p.CreatedFor]; j != nil && pc.owner[p.Name] == "" && j.GetNodePool() == "" && j.GetClusterName() == pc.cl.GetName() {
				pc.owner[p.Name] = j.GetId()
			}
		}
	}
}

// idlePools tells the scheduler which shapes each cluster could serve
// without creating a pool, so selection prefers it.
func (c *cycle) idlePools(cluster string) map[queue.Pool]int {
	pc := c.pools[cluster]
	if pc == nil {
		return nil
	}
	out := map[queue.Pool]int{}
	for _, p := range pc.pools {
		if pc.idle(p) {
			out[queue.Pool{AcceleratorType: p.AcceleratorType, Topology: p.Topology}]++
		}
	}
	return out
}

// acquirePool gets a picked job its pool, and reports whether the job may
// go on to dispatch: it reuses an idle pool of its shape (no creation),
// else starts creating its own and then watches it until it is ready.
func (m *Manager) acquirePool(ctx context.Context, c *cycle, pc *poolCluster, j *falconv1.Job) bool {
	if pc.err != nil {
		return false
	}
	switch {
	case j.GetNodePool() == "":
		if p, ok := m.createdFor(pc, j); ok {
			// Created for this job by a controller that died before
			// recording it: record it, no call to GKE needed.
			msg := fmt.Sprintf("node pool %s (%s) was created for this job before a controller restart; waiting for it", p.Name, p.SupplyMode)
			m.assign(ctx, c, pc, j, p.Name, lifecycle.ReasonProvisioning, msg)
			return false
		}
		if p, ok := m.takeIdle(pc, j); ok {
			if p.State == lifecycle.PoolProvisioning {
				// Still being created for a job that ended (an abort while
				// provisioning): sooner ready than a pool created now.
				msg := fmt.Sprintf("taking over node pool %s (%s %s), still being created", p.Name, p.AcceleratorType, p.Topology)
				if m.assign(ctx, c, pc, j, p.Name, lifecycle.ReasonProvisioning, msg) {
					m.reused(pc, j, p.Name, "node pool taken over while provisioning")
				}
				return false
			}
			msg := fmt.Sprintf("reusing idle node pool %s (%s %s); submitting to cluster %s", p.Name, p.AcceleratorType, p.Topology, pc.cl.GetName())
			if !m.assign(ctx, c, pc, j, p.Name, lifecycle.ReasonDispatching, msg) {
				return false
			}
			m.reused(pc, j, p.Name, "node pool reused")
			return true
		}
		if m.awaitEndingPool(pc, j) {
			// Its job's end is being recorded (ends): the pool is free
			// once the row is folded, and j is looked at then.
			return false
		}
		if n := m.poolsOfShape(pc, j); m.poolCap > 0 && n >= m.poolCap {
			pools := "node pools"
			if n == 1 {
				pools = "node pool"
			}
			msg := fmt.Sprintf("cluster %s has %d %s of %s %s, the pool cap (cap=%d), none free; waiting for one to fall free", pc.cl.GetName(), n, pools, deviceType(j), topologyOrEmpty(j), m.poolCap)
			m.updatePool(ctx, j, lifecycle.ReasonWaitingForPool, msg, "")
			return false
		}
		m.provision(ctx, c, pc, j, "")
		return false
	case lifecycle.Reason(j.GetReason()) == lifecycle.ReasonProvisioning || lifecycle.Reason(j.GetReason()) == lifecycle.ReasonProvisioningFallback:
		// A pool of the job's shape that fell idle meanwhile is ready now;
		// the one being created is not. Switch: the abandoned pool is then
		// taken over by the next job of its shape, or released.
		if p, ok := m.takeIdle(pc, j); ok && p.State == lifecycle.PoolReady {
			msg := fmt.Sprintf("reusing idle node pool %s (%s %s) instead of waiting for %s; submitting to cluster %s", p.Name, p.AcceleratorType, p.Topology, j.GetNodePool(), pc.cl.GetName())
			if !m.assign(ctx, c, pc, j, p.Name, lifecycle.ReasonDispatching, msg) {
				return false
			}
			m.reused(pc, j, p.Name, "node pool reused while provisioning")
			return true
		}
		if st, ok := m.mem.polls[j.GetId()]; ok && m.now().Before(st.next) {
			c.deadline(st.next)
			return false
		}
		check, err := pc.b.CheckPool(ctx, pc.cl, j.GetNodePool())
		if pe := (*PoolError)(nil); errors.As(err, &pe) {
			delete(m.mem.polls, j.GetId())
			if d := planPoolFailure(pe, j.GetNodePool(), m.tookOver(pc, j)); d.verb == proceed {
				// A pool of its own, as if it had found none; the failed
				// one, owned by no one, is deleted.
				m.provision(ctx, c, pc, j, d.message)
			} else {
				m.stopAndFail(ctx, c, j, d)
			}
			return false
		}
		if m.poolFailed(ctx, c, pc, j, err) {
			return false
		}
		if !check.Ready {
			if check.Message != "" {
				m.updatePool(ctx, j, lifecycle.Reason(j.GetReason()), check.Message, j.GetNodePool())
			}
			m.schedulePoll(c, j.GetId(), false)
			return false
		}
		msg := fmt.Sprintf("node pool %s is running; submitting to cluster %s", j.GetNodePool(), pc.cl.GetName())
		return m.assign(ctx, c, pc, j, j.GetNodePool(), lifecycle.ReasonDispatching, msg)
	}
	return true // Dispatching with its pool: submit or observe
}

// provision starts creating j's own pool and records it on j, its message
// after why (what became of the pool j held, if any): j then waits for it.
func (m *Manager) provision(ctx context.Context, c *cycle, pc *poolCluster, j *falconv1.Job, why string) {
	prov, err := pc.b.ProvisionPool(ctx, pc.cl, j)
	if m.poolFailed(ctx, c, pc, j, err) {
		return
	}
	delete(m.mem.poolLists, pc.cl.GetName()) // list again: a pool was added
	if m.assign(ctx, c, pc, j, prov.Pool, prov.Reason, why+prov.Message) {
		m.log.Info("node pool provisioning", "job", j.GetId(), "exp", j.GetExpId(), "pool", prov.Pool, "cluster", pc.cl.GetName(), "reason", prov.Reason)
		m.metrics.PoolCreates.WithLabelValues(pc.cl.GetName(), string(prov.Reason)).Inc()
	}
}

// tookOver reports whether j's pool was created for another job (one
// that ended while it was being created, see takeIdle).
func (m *Manager) tookOver(pc *poolCluster, j *falconv1.Job) bool {
	p, ok := pc.pools[j.GetNodePool()]
	return ok && p.CreatedFor != "" && p.CreatedFor != j.GetId()
}

// assign records pool on j with reason and msg and makes it j's for the rest
// of the cycle (releasing any pool j held before). A job provisioning is
// looked at again from the first poll interval; one dispatching is not.
func (m *Manager) assign(ctx context.Context, c *cycle, pc *poolCluster, j *falconv1.Job, pool string, reason lifecycle.Reason, msg string) bool {
	old := j.GetNodePool()
	if !m.updatePool(ctx, j, reason, msg, pool) {
		return false
	}
	if old != "" && old != pool {
		delete(pc.owner, old)
	}
	pc.owner[pool] = j.GetId()
	if reason == lifecycle.ReasonDispatching {
		delete(m.mem.polls, j.GetId())
	} else {
		m.schedulePoll(c, j.GetId(), true)
	}
	return true
}

// poolsOfShape counts the cluster's pools of j's shape that can still
// serve a job (being created or ready, no deletion started): what the pool
// cap bounds.
func (m *Manager) poolsOfShape(pc *poolCluster, j *falconv1.Job) int {
	shape := queue.Pool{AcceleratorType: deviceType(j), Topology: topologyOrEmpty(j)}
	n := 0
	for _, p := range pc.pools {
		if p.AcceleratorType == shape.AcceleratorType && p.Topology == shape.Topology && p.State.Usable() && !m.deleting(pc.cl.GetName(), p.Name) {
			n++
		}
	}
	return n
}

// freeOfShape reports whether the cluster has a pool of j's shape that no
// live job owns and that can serve j: what a job at the pool cap waits for.
func (m *Manager) freeOfShape(pc *poolCluster, j *falconv1.Job) bool {
	_, ok := ReusablePool(pc.pools, pc.owner, queue.Pool{AcceleratorType: deviceType(j), Topology: topologyOrEmpty(j)},
		func(pool string) bool { return m.deleting(pc.cl.GetName(), pool) })
	return ok
}

// awaitEndingPool reports whether a pool of j's shape falls free as soon
// as its job's end, being recorded between cycles (see ends), is folded;
// if so j is looked at then, and takes it rather than have another created.
// The oldest such pool is awaited, as takeIdle would take it.
func (m *Manager) awaitEndingPool(pc *poolCluster, j *falconv1.Job) bool {
	if m.noReuse {
		return false
	}
	shape := queue.Pool{AcceleratorType: deviceType(j), Topology: topologyOrEmpty(j)}
	var owned []Pool // pools of the shape another job owns: it may be ending
	for _, p := range pc.pools {
		owner := pc.owner[p.Name]
		if owner != "" && owner != j.GetId() && p.AcceleratorType == shape.AcceleratorType && p.Topology == shape.Topology &&
			p.State.Usable() && !m.deleting(pc.cl.GetName(), p.Name) {
			owned = append(owned, p)
		}
	}
	sort.Slice(owned, func(a, b int) bool { return older(owned[a], owned[b]) })
	for _, p := range owned { // await says whether its owner's end is being recorded
		if m.ends.await(pc.owner[p.Name], j.GetId()) {
			m.log.Debug("waiting for a node pool whose job just ended", "job", j.GetId(), "pool", p.Name, "cluster", pc.cl.GetName())
			return true
		}
	}
	return false
}

// reused logs and counts a job given a pool that was not created for it.
func (m *Manager) reused(pc *poolCluster, j *falconv1.Job, pool, what string) {
	m.log.Info(what, "job", j.GetId(), "exp", j.GetExpId(), "pool", pool, "cluster", pc.cl.GetName())
	m.metrics.PoolReuses.WithLabelValues(pc.cl.GetName()).Inc()
}

// createdFor finds the pool created for j, if it still exists and can
// still serve it.
func (m *Manager) createdFor(pc *poolCluster, j *falconv1.Job) (Pool, bool) {
	for _, p := range pc.pools {
		if p.CreatedFor == j.GetId() && (p.State == lifecycle.PoolReady || p.State == lifecycle.PoolProvisioning) && !m.deleting(pc.cl.GetName(), p.Name) {
			return p, true
		}
	}
	return Pool{}, false
}

// takeIdle picks a pool of the job's shape that no live job owns: a ready
// one first, else one still being created; oldest first within each, so
// the choice is deterministic.
func (m *Manager) takeIdle(pc *poolCluster, j *falconv1.Job) (Pool, bool) {
	if m.noReuse {
		return Pool{}, false
	}
	return ReusablePool(pc.pools, pc.owner, queue.Pool{AcceleratorType: deviceType(j), Topology: topologyOrEmpty(j)},
		func(pool string) bool { return m.deleting(pc.cl.GetName(), pool) })
}

// ReusablePool is the reuse rule of takeIdle, exported for the what-if
// simulator: among pools of the shape that no live job owns (owner) and
// that are not being deleted (deleting), a Ready one first, else one still
// being created; oldest first within each, by name among equals.
func ReusablePool(pools map[string]Pool, owner map[string]string, shape queue.Pool, deleting func(pool string) bool) (Pool, bool) {
	var best Pool
	found := false
	for _, p := range pools {
		free := owner[p.Name] == "" && (p.State == lifecycle.PoolReady || p.State == lifecycle.PoolProvisioning)
		if !free || p.AcceleratorType != shape.AcceleratorType || p.Topology != shape.Topology || deleting(p.Name) {
			continue
		}
		if !found || betterReuse(p, best) {
			best, found = p, true
		}
	}
	return best, found
}

// betterReuse orders reuse candidates: ready before provisioning, then older.
func betterReuse(a, b Pool) bool {
	if ra, rb := a.State == lifecycle.PoolReady, b.State == lifecycle.PoolReady; ra != rb {
		return ra
	}
	return older(a, b)
}

// older orders pools oldest first, by name among equals, so every choice
// among pools is deterministic.
func older(a, b Pool) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.Name < b.Name
}

// topologyOrEmpty is the job's shape as pools are labelled with it
// (placement.PoolShape).
func topologyOrEmpty(j *falconv1.Job) string { return placement.PoolShape(j.GetTaskSpec()) }

// poolFailed handles an error from the backend: a *PoolError fails the job
// with its Reason (the pool, if any, is then released like any other);
// anything else is retried next cycle. It reports whether there was one.
func (m *Manager) poolFailed(ctx context.Context, c *cycle, pc *poolCluster, j *falconv1.Job, err error) bool {
	if err == nil {
		return false
	}
	var pe *PoolError
	if errors.As(err, &pe) {
		delete(m.mem.polls, j.GetId())
		m.stopAndFail(ctx, c, j, failed(pe.Reason, pe.Message))
		return true
	}
	m.log.Warn("node pool", "job", j.GetId(), "cluster", pc.cl.GetName(), "err", err)
	m.schedulePoll(c, j.GetId(), false)
	return true
}

// schedulePoll sets when a provisioning job's pool is looked at next.
func (m *Manager) schedulePoll(c *cycle, id string, first bool) {
	st, ok := m.mem.polls[id]
	if !ok || first {
		st = &backoff{interval: m.poolTiming.PollInitial}
		m.mem.polls[id] = st
	} else {
		st.interval = min(2*st.interval, m.poolTiming.PollMax)
	}
	st.next = m.now().Add(st.interval)
	c.deadline(st.next)
}

// updatePool moves a Pending job to reason with msg, recording its pool.
func (m *Manager) updatePool(ctx context.Context, j *falconv1.Job, reason lifecycle.Reason, msg, pool string) bool {
	if j.GetReason() == string(reason) && j.GetMessage() == msg && (pool == "" || pool == j.GetNodePool()) {
		return true
	}
	return m.write(ctx, j, &falconv1.UpdateJobStatusRequest{
		Id: j.GetId(), ExpectedStatus: j.GetStatus(), Status: string(lifecycle.Pending),
		Reason: string(reason), Message: msg, NodePool: pool,
	})
}

// releasePools is phase 6 and the orphan sweep in one level-triggered
// pass: every pool no live job owns is kept while a job waiting on this
// cluster can use it (the next pick takes it), or while it is young and
// still being created; otherwise it is deleted. A job that ended, was
// aborted, or timed out stops owning its pool the moment its status is
// written, so its outcome never waits on the deletion and a crash at any
// point leaves a state this pass resumes from.
func (m *Manager) releasePools(ctx context.Context, c *cycle, waiting []*falconv1.Job) {
	demand := map[string]map[queue.Pool]int{}
	want := func(cluster string, j *falconv1.Job) {
		if demand[cluster] == nil {
			demand[cluster] = map[queue.Pool]int{}
		}
		demand[cluster][queue.Pool{AcceleratorType: deviceType(j), Topology: topologyOrEmpty(j)}]++
	}
	var capped []*falconv1.Job
	for _, j := range waiting {
		if lifecycle.Reason(j.GetReason()) == lifecycle.ReasonWaitingForPool && j.GetNodePool() == "" {
			// At the pool cap: the next pool of its shape to fall free
			// is its.
			want(j.GetClusterName(), j)
			capped = append(capped, j)
			continue
		}
		key, phase, ok := m.mem.sched.Lookup(j.GetId())
		if !ok || phase != queue.PhaseWaiting {
			continue
		}
		want(key.Cluster, j)
	}
	now := m.now()
	for _, j := range capped {
		// A pool it can take has fallen free: it takes it at once (the
		// next cycle looks at it), not at the next resync. Nothing is
		// free for it without reuse, so a per-job policy is not woken.
		if pc := c.pools[j.GetClusterName()]; pc != nil && pc.err == nil && !m.noReuse && m.freeOfShape(pc, j) {
			m.mem.due[j.GetId()] = now
			c.deadline(now)
		}
	}
	for name, pc := range c.pools {
		if pc.err != nil {
			continue
		}
		pools := make([]Pool, 0, len(pc.pools))
		for _, p := range pc.pools {
			pools = append(pools, p)
		}
		sort.Slice(pools, func(a, b int) bool { return older(pools[a], pools[b]) })
		var idleSince map[string]time.Time
		if m.linger > 0 {
			idleSince = make(map[string]time.Time, len(pools))
			for _, p := range pools {
				if t, ok := m.mem.idleSince[poolKey{name, p.Name}]; ok {
					idleSince[p.Name] = t
				}
			}
		}
		for _, d := range PlanPools(PoolFacts{
			Pools: pools, Owner: pc.owner, Demand: demand[name], Now: now,
			Grace: m.poolTiming.Grace, NoReuse: m.noReuse, Linger: m.linger, IdleSince: idleSince,
		}) {
			k := poolKey{name, d.Pool.Name}
			if d.Verb == PoolOwned {
				delete(m.mem.idleSince, k)
				continue
			}
			if _, ok := m.mem.idleSince[k]; !ok {
				m.mem.idleSince[k] = now
			}
			switch d.Verb {
			case PoolKept:
				m.keep(k)
				c.deadline(d.Deadline)
			case PoolDelete:
				m.deletePool(ctx, c, pc, d.Pool)
			}
		}
	}
}

// keep forgets a deletion that never started (GKE was busy), so a pool kept
// for a waiting job can be handed to it.
func (m *Manager) keep(k poolKey) {
	if st, ok := m.mem.deletes[k]; ok && st.attempts == 0 {
		delete(m.mem.deletes, k)
	}
}

func (m *Manager) deleting(cluster, pool string) bool {
	_, ok := m.mem.deletes[poolKey{cluster, pool}]
	return ok
}

// deletePool starts deleting p, retrying failures with backoff; once
// DeleteAttempts have failed, the failure is noted on the pool's last job
// (its outcome unchanged) and retries continue at the longest interval.
func (m *Manager) deletePool(ctx context.Context, c *cycle, pc *poolCluster, p Pool) {
	k := poolKey{pc.cl.GetName(), p.Name}
	st := m.mem.deletes[k]
	now := m.now()
	if st != nil && now.Before(st.next) {
		c.deadline(st.next)
		return
	}
	if st == nil {
		st = &backoff{interval: m.poolTiming.DeleteBackoffInitial}
		m.mem.deletes[k] = st
	}
	err := pc.b.DeletePool(ctx, pc.cl, p.Name)
	switch {
	case err == nil:
		m.metrics.PoolDeletes.WithLabelValues(k.cluster, "started").Inc()
		m.log.Info("node pool deleting", "pool", p.Name, "cluster", k.cluster, "last_job", m.mem.lastOwner[k])
		p.State = lifecycle.PoolDeleting
		pc.pools[p.Name] = p
		delete(m.mem.poolLists, k.cluster)
		// Look again soon: the deletion may fail, which counts as an attempt.
		st.attempts++
		st.next = now.Add(st.interval)
		c.deadline(st.next)
		return
	case errors.Is(err, ErrPoolBusy):
		m.metrics.PoolDeletes.WithLabelValues(k.cluster, "busy").Inc()
		st.next = now.Add(m.poolTiming.PollInitial) // not an attempt: the create is still running
		c.deadline(st.next)
		return
	}
	m.metrics.PoolDeletes.WithLabelValues(k.cluster, "failed").Inc()
	st.fail(err, now, m.poolTiming.DeleteBackoffMax)
	c.deadline(st.next)
	m.log.Warn("delete node pool", "pool", p.Name, "cluster", k.cluster, "attempt", st.attempts, "err", err)
	if st.attempts >= m.poolTiming.DeleteAttempts && !st.noted {
		owner := m.mem.lastOwner[k]
		if owner == "" {
			owner = p.CreatedFor
		}
		note := fmt.Sprintf("node pool %s could not be deleted after %d attempts: %v", p.Name, st.attempts, err)
		if owner != "" {
			if _, err := m.jobs.AppendJobMessage(ctx, &falconv1.AppendJobMessageRequest{Id: owner, Note: note}); err != nil {
				m.log.Warn("note failed pool deletion", "job", owner, "err", err)
				return
			}
		}
		st.noted = true
		st.interval = m.poolTiming.DeleteBackoffMax
	}
}

// forgetPools drops the per-pool memory of pools that are gone.
func (m *Manager) forgetPools(c *cycle) {
	for k := range m.mem.deletes {
		if pc := c.pools[k.cluster]; pc != nil && pc.err == nil {
			if _, ok := pc.pools[k.pool]; !ok {
				delete(m.mem.deletes, k)
				delete(m.mem.idleSince, k)
				delete(m.mem.lastOwner, k)
			}
		}
	}
	for k := range m.mem.idleSince {
		if pc := c.pools[k.cluster]; pc == nil || (pc.err == nil && pc.pools[k.pool].Name == "") {
			delete(m.mem.idleSince, k)
		}
	}
}

// gauges sets the queue, cluster and node pool gauges from this cycle's
// view; a series the view no longer has is deleted (GaugeSet).
func (m *Manager) gauges(c *cycle) {
	g := &m.gauged
	for _, st := range m.mem.sched.Snapshot() {
		g.waiting.Set(float64(st.Waiting), st.Key.Cluster, st.Key.Topology)
		acquiring := 0.0
		if st.Acquiring.ID != "" {
			acquiring = 1
		}
		g.acquiring.Set(acquiring, st.Key.Cluster, st.Key.Topology)
	}
	for name := range c.clusters {
		unreachable := 0.0
		if c.health[name].Err != nil {
			unreachable = 1
		}
		g.unreachable.Set(unreachable, name)
	}
	for name, pc := range c.pools {
		if pc.err != nil {
			continue
		}
		var owned, idle, provisioning, deleting, failed int
		for _, p := range pc.pools {
			switch {
			case pc.owner[p.Name] != "":
				owned++
			case p.State == lifecycle.PoolReady:
				idle++
			case p.State == lifecycle.PoolProvisioning:
				provisioning++
			case p.State == lifecycle.PoolDeleting:
				deleting++
			default:
				failed++
			}
		}
		g.pools.Set(float64(owned), name, "owned")
		g.pools.Set(float64(idle), name, "idle")
		g.pools.Set(float64(provisioning), name, "provisioning")
		g.pools.Set(float64(deleting), name, "deleting")
		g.pools.Set(float64(failed), name, "failed")
	}
	g.waiting.Flush()
	g.acquiring.Flush()
	g.unreachable.Flush()
	g.pools.Flush()
}

// report sends each cluster's capacity view, at most every ReportEvery.
func (m *Manager) report(ctx context.Context, c *cycle, jobs []*falconv1.Job) {
	now := m.now()
	due := false
	for name := range c.clusters {
		due = due || now.Sub(m.mem.reportedAt[name]) >= m.poolTiming.ReportEvery
	}
	if !due {
		return // the counts below walk every live job; only when one is due
	}
	stats := map[string][]queue.Stats{}
	for _, st := range m.mem.sched.Snapshot() {
		stats[st.Key.Cluster] = append(stats[st.Key.Cluster], st)
	}
	running := map[queue.Key]int32{}
	types := map[queue.Key]map[string]bool{}
	for _, j := range jobs {
		var key queue.Key
		switch k, _, ok := m.mem.sched.Lookup(j.GetId()); {
		case j.GetStatus() == string(lifecycle.Running):
			key = queue.Key{Cluster: j.GetClusterName(), Topology: queueKey(j)}
			running[key]++
		case ok:
			key = k
		default:
			continue
		}
		if types[key] == nil {
			types[key] = map[string]bool{}
		}
		types[key][deviceType(j)] = true
	}
	for name, cl := range c.clusters {
		if now.Sub(m.mem.reportedAt[name]) < m.poolTiming.ReportEvery {
			continue
		}
		st := &falconv1.ClusterStatus{ClusterName: name, ReportedAt: timestamppb.New(now)}
		queues := map[string]*falconv1.QueueStatus{}
		q := func(topo string) *falconv1.QueueStatus {
			if queues[topo] == nil {
				queues[topo] = &falconv1.QueueStatus{Topology: topo}
			}
			return queues[topo]
		}
		for _, s := range stats[name] {
			qs := q(s.Key.Topology)
			qs.Waiting = int32(s.Waiting)
			qs.AcquiringJobId = s.Acquiring.ID
		}
		for k, n := range running {
			if k.Cluster == name {
				q(k.Topology).Running = n
			}
		}
		var errs []string
		if err := c.health[name].Err; err != nil {
			errs = append(errs, "unreachable: "+err.Error())
		}
		if pc := c.pools[name]; pc != nil {
			if pc.err != nil {
				errs = append(errs, "listing node pools: "+pc.err.Error())
			}
			for _, p := range pc.pools {
				ps := &falconv1.NodePoolStatus{
					Name: p.Name, AcceleratorType: p.AcceleratorType, Topology: p.Topology, Nodes: p.Nodes,
					Status: p.Status, SupplyMode: p.SupplyMode, OwnerJobId: pc.owner[p.Name],
				}
				if !p.CreatedAt.IsZero() {
					ps.CreatedAt = timestamppb.New(p.CreatedAt)
				}
				if t, ok := m.mem.idleSince[poolKey{name, p.Name}]; ok && ps.OwnerJobId == "" {
					ps.IdleSince = timestamppb.New(t)
				}
				st.NodePools = append(st.NodePools, ps)
			}
			sort.Slice(st.NodePools, func(a, b int) bool { return st.NodePools[a].Name < st.NodePools[b].Name })
			if res, err := pc.b.Reservation(ctx, cl); err != nil {
				st.Reservation = &falconv1.ReservationCapacity{Name: cl.GetDefaultReservation(), Error: err.Error()}
			} else {
				st.Reservation = res
				if res != nil {
					m.metrics.ReservationNodes.WithLabelValues(name, res.GetName(), "in_use").Set(float64(res.GetInUse()))
					m.metrics.ReservationNodes.WithLabelValues(name, res.GetName(), "free").Set(float64(res.GetFree()))
				}
			}
		}
		st.Error = strings.Join(errs, "; ")
		topos := make([]string, 0, len(queues))
		for t := range queues {
			topos = append(topos, t)
		}
		sort.Strings(topos)
		for _, t := range topos {
			for a := range types[queue.Key{Cluster: name, Topology: t}] {
				queues[t].AcceleratorTypes = append(queues[t].AcceleratorTypes, a)
			}
			sort.Strings(queues[t].AcceleratorTypes)
			st.Queues = append(st.Queues, queues[t])
		}
		if _, err := m.clusters.ReportClusterStatus(ctx, &falconv1.ReportClusterStatusRequest{Status: st}); err != nil {
			m.log.Warn("report cluster status", "cluster", name, "err", err)
			continue
		}
		m.mem.reportedAt[name] = now
	}
}
