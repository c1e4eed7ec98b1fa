package resourcemanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/placement"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
	"github.com/falconhq/falcon/internal/store"
)

// cycle is one Reconcile's view of the world.
type cycle struct {
	clusters map[string]*falconv1.Cluster
	cands    []queue.Cluster
	next     time.Time               // earliest deadline seen
	pools    map[string]*poolCluster // clusters whose backend manages pools
	// health is what each cluster's backend knows of its connection, read
	// once at the start: a cluster in backoff gets no calls this cycle.
	health map[string]Health
	// all is every live job as the cycle began (statuses written since
	// included, the pointers being the snapshot's).
	all []*falconv1.Job
	// cur is the job being looked at: deadlines met while at it are when
	// it must be looked at again.
	cur string
	mem *memory
	// full: the cycle looks at every job (a resync), so the first
	// queuePositions looks at every queue; positioned: it has run.
	full, positioned bool
	// submitted holds what concurrent submissions returned (see
	// submitAll), by job ID, for dispatch to take.
	submitted map[string]error
	// configRead names the jobs whose config came back with the write
	// of their pick (empty if the experiment has none): submit need not
	// read it.
	configRead map[string]bool
	// writes are updates sent together, each under its own precondition:
	// a cycle learning of many pods that finished or restarted writes them
	// in one call (flush), and a slot holder's Running rides the write
	// that records the next pick of its queue (pickAll).
	writes []deferred
	// phases records how long each step of the cycle took, for the debug
	// log: where a slow cycle spent its time.
	phases []any
	mark   time.Time
}

// lap records the time since the previous lap as the step named.
func (c *cycle) lap(name string) {
	now := time.Now()
	c.phases = append(c.phases, name, now.Sub(c.mark).Round(time.Microsecond))
	c.mark = now
}

// deferred is a status update sent by flush; then runs if it landed.
type deferred struct {
	j    *falconv1.Job
	req  *falconv1.UpdateJobStatusRequest
	then func()
}

// later queues the write of d for flush (a Pending job's progress, a
// job's Running, a Running job's new message or its success); nothing is
// queued when nothing changes.
func (c *cycle) later(j *falconv1.Job, d decision, then func()) {
	if !d.changes(j) {
		return
	}
	c.writes = append(c.writes, deferred{j: j, then: then, req: d.request(j)})
}

// flush sends the queued updates, and picks (reqs[i] recording jobs[i]'s
// pick, with the config its submission needs) in the same batch, so a slot
// holder's Running, a finished job's Succeeded and the pick taking a slot
// land together. It returns what follows each queued update that landed
// (a finished job's cleanup), for the caller to run once the picks are
// submitted: a cleanup is a cluster call, and the pool it frees goes to a
// pick only next cycle. One that did not land (the job changed meanwhile,
// usually an abort, or the call failed) is looked at again next cycle,
// like any lost race.
func (m *Manager) flush(ctx context.Context, c *cycle, picked []*falconv1.Job, reqs []*falconv1.UpdateJobStatusRequest) (then []func()) {
	if len(c.writes) == 0 && len(picked) == 0 {
		return nil
	}
	jobs := make([]*falconv1.Job, 0, len(c.writes)+len(picked))
	all := make([]*falconv1.UpdateJobStatusRequest, 0, len(c.writes)+len(picked))
	for _, w := range c.writes {
		jobs, all = append(jobs, w.j), append(all, w.req)
	}
	m.writeBatch(ctx, append(jobs, picked...), append(all, reqs...))
	for _, w := range c.writes {
		if w.j.GetStatus() != w.req.GetStatus() || w.j.GetMessage() != w.req.GetMessage() {
			c.look(w.j)
			c.deadline(m.now())
			c.cur = ""
			continue
		}
		if lifecycle.JobMachine.IsTerminal(lifecycle.Status(w.j.GetStatus())) {
			m.metrics.Finished.WithLabelValues(w.j.GetClusterName(), w.j.GetStatus(), w.j.GetReason()).Inc()
		}
		if w.then != nil {
			then = append(then, w.then)
		}
	}
	c.writes = nil
	return then
}

// run calls each of fs in turn.
func run(fs []func()) {
	for _, f := range fs {
		f()
	}
}

func (c *cycle) deadline(t time.Time) {
	if t.IsZero() {
		return
	}
	if c.next.IsZero() || t.Before(c.next) {
		c.next = t
	}
	if c.cur != "" {
		if d, ok := c.mem.due[c.cur]; !ok || t.Before(d) {
			c.mem.due[c.cur] = t
		}
	}
}

// look makes j the job whose deadlines are being met.
func (c *cycle) look(j *falconv1.Job) {
	c.cur = j.GetId()
	delete(c.mem.due, c.cur)
}

// Reconcile runs one cycle and returns the earliest upcoming deadline (zero
// if none), so Run can wake exactly then:
//  1. bring the snapshot of live jobs up to date: the experiments the
//     change feed reported (or every live job, on a resync); read the
//     registered clusters again on a resync or once the last read is
//     clusterListAge old; the jobs to look at are those read, those a backend
//     reported (Touch), and those whose deadline has come; every job when
//     a cluster's reachability changed;
//  2. Aborting: stop the job on its cluster (if it reached one), then mark
//     it Aborted — in every phase: waiting, acquiring or running;
//  3. Pending and acquiring (Reason Dispatching, cluster set): observe it;
//     all replicas running -> Running (releasing its queue slot); failed ->
//     Failed; gone (a dispatch cut short by a crash) -> dispatch again;
//     waiting too long for its resources -> Failed/Timeout;
//  4. Running: fail it with Reason Timeout once timeout_seconds have passed
//     since it started (stopping it first); otherwise observe it, its end
//     (and a holder's Running of step 3) queued for the write of step 7;
//  5. Pending and waiting: on a resync, a job queued on a cluster that has
//     since left service (maintenance, offline, deleted) leaves that queue;
//     place every job not in a queue in a (cluster, queue key) queue, or,
//     when it is pinned to a cluster out of service, say it waits for it;
//  6. hand every free queue slot to the next job by the pick rule and
//     dispatch it, except on clusters whose backend is backing off;
//  7. the positions of the waiting jobs in every queue that changed: the
//     next in line at once, the rest of the front every nearRefresh, the
//     tail every tailRefresh. They, the picks and the updates queued above
//     are one write (queuePositions, flush), made before the picks are
//     submitted;
//  8. node pools: keep each idle pool a waiting job can use, delete the
//     rest; report each cluster's capacity view.
//
// Without a change feed (Run starts one; a bare Reconcile, as tests call
// it, has none) every cycle is a resync.
func (m *Manager) Reconcile(ctx context.Context) (time.Time, error) {
	start := time.Now()
	m.metrics.Cycles.Inc()
	defer func() { m.metrics.CycleSeconds.Observe(time.Since(start).Seconds()) }()
	look, full, err := m.refresh(ctx)
	if err != nil {
		m.metrics.CycleErrors.Inc()
		return time.Time{}, err
	}
	cl, err := m.clusterList(ctx, full)
	if err != nil {
		// What refresh took is looked at next cycle: the jobs it read are
		// in the snapshot already.
		m.requeueTouches(look, full)
		if full && m.follower != nil {
			m.follower.Again()
		}
		m.metrics.CycleErrors.Inc()
		return time.Time{}, err
	}
	m.lastOK.Store(time.Now().UnixNano())
	c := &cycle{clusters: map[string]*falconv1.Cluster{}, health: map[string]Health{}, mem: m.mem, full: full}
	for _, x := range cl.GetItems() {
		c.clusters[x.GetName()] = x
		if hr, ok := m.backends[x.GetBackend()].(HealthReporter); ok {
			h := hr.Health(x)
			c.health[x.GetName()] = h
			if (h.Err != nil) != m.mem.unreachable[x.GetName()] {
				// Every job there has news: its position message or its
				// unreachable note changes.
				full = true
				m.mem.unreachable[x.GetName()] = h.Err != nil
			}
		}
	}
	for name := range c.clusters {
		if m.outOfService(c, name) != "" || c.health[name].Backoff {
			m.deck.dropCluster(name) // as pickAll skips it
		}
	}
	c.all = make([]*falconv1.Job, 0, len(m.snap.jobs))
	for _, j := range m.snap.jobs {
		c.all = append(c.all, j)
	}
	now := m.now()
	for id, t := range m.mem.due {
		if !now.Before(t) {
			look[id] = true
		} else {
			c.deadline(t)
		}
	}
	var todo []*falconv1.Job
	if full {
		todo = ordered(m.snap.jobs)
	} else {
		sel := make(map[string]*falconv1.Job, len(look))
		for id := range look {
			if j := m.snap.jobs[id]; j != nil {
				sel[id] = j
			}
		}
		todo = ordered(sel)
	}
	m.metrics.CycleJobs.Observe(float64(len(todo)))
	c.mark = start
	c.lap("read")
	defer func() {
		m.log.Debug("resource manager cycle", append([]any{"jobs", len(todo), "full", full, "took", time.Since(start)}, c.phases...)...)
	}()

	m.loadPools(ctx, c, c.all)
	c.cands = m.candidates(cl.GetItems())
	for i := range c.cands {
		c.cands[i].IdlePools = c.idlePools(c.cands[i].Name)
	}

	c.lap("pools")
	var waiting []*falconv1.Job
	for _, j := range todo {
		if ctx.Err() != nil {
			return c.next, ctx.Err()
		}
		c.look(j)
		pending := j.GetStatus() == string(lifecycle.Pending)
		next := pending && j.GetReason() == string(lifecycle.ReasonNext)
		if !next && !(pending && acquiring(j)) {
			// Neither on deck nor holding a slot any more (aborted,
			// ended, or its write failed): the deck starts nothing for it
			// from now, and a start it made is in flight (below).
			m.deck.drop(j.GetId())
		}
		switch {
		case m.sub.busy(j.GetId()):
			// Its create is in flight: its return brings the job back
			// (submitter), and an abort's stop waits for it.
		case j.GetStatus() == string(lifecycle.Aborting):
			m.abort(ctx, c, j)
		case pending && acquiring(j):
			m.acquire(ctx, c, j, false)
		case next:
			m.seatOnDeck(ctx, c, j)
		case pending:
			waiting = append(waiting, j)
		}
	}
	c.cur = ""
	c.lap("look")
	// Running jobs are observed before any slot is handed over, so a job's
	// end rides the write of the picks that follow (one write, not two)
	// and reaches its experiment without waiting for the rest of the
	// cycle; a job stopped here for its timeout leaves its pool to them.
	for _, j := range todo {
		if j.GetStatus() == string(lifecycle.Running) {
			c.look(j)
			m.observeRunning(ctx, c, j)
		}
	}
	c.cur = ""
	c.lap("running")
	if full {
		m.requeue(c, waiting)
	}
	probed := false // the clusters' last probes are read once, when a job is placed
	policy, err := queue.ParsePolicy(cl.GetSelection())
	if err != nil {
		// Only a newer server stores a policy this controller does not know.
		m.log.Warn("the registry's selection is unknown here; placing by spread", "err", err)
		policy = queue.PolicySpread
	}
	for _, j := range waiting {
		c.look(j)
		if p := pinned(j); p != "" {
			if why := m.outOfService(c, p); why != "" {
				// Selection would refuse it too; this says why, and that the
				// job stays rather than going elsewhere.
				msg := fmt.Sprintf("pinned cluster %s is not active: %s; the job waits for it (the experiment's cluster_name)", p, why)
				m.apply(ctx, j, recorded(lifecycle.Pending, lifecycle.ReasonWaiting, msg))
				continue
			}
		}
		if _, _, queued := m.mem.sched.Lookup(j.GetId()); queued {
			continue
		}
		if !probed {
			m.addProbes(ctx, c.cands)
			probed = true
		}
		key, sel, err := m.mem.sched.EnqueueExplained(schedJob(j), c.cands, policy)
		if err != nil {
			var unplaceable *queue.UnplaceableError
			if errors.As(err, &unplaceable) {
				// Fails it when no cluster could ever take it, else says why it waits.
				if d := planUnplaceable(sel, unplaceable, pinned(j)); d.to == lifecycle.Failed {
					m.fail(ctx, j, d)
				} else {
					m.apply(ctx, j, d)
				}
			} else {
				m.log.Warn("enqueue job", "job", j.GetId(), "err", err)
			}
			continue
		}
		m.mem.touched[key] = true
	}
	c.cur = ""
	c.lap("enqueue")
	// Jobs that ended above (aborts, failures) left their pools to the
	// picks that follow.
	m.loadOwners(c, c.all)
	m.pickAll(ctx, c, m.snap.jobs)
	if full {
		m.armDeck(c)
	}
	// What no pick carried (a cycle with no free slot, or a closing one).
	m.queuePositions(c, m.snap.jobs)
	run(m.flush(ctx, c, nil, nil))
	c.lap("pick")
	m.clearLeftovers(ctx, c)
	// Jobs that ended above released their pools; decide on those now
	// against the jobs still waiting.
	m.loadOwners(c, c.all)
	if len(c.pools) > 0 {
		var allWaiting []*falconv1.Job
		for _, j := range c.all {
			capped := lifecycle.Reason(j.GetReason()) == lifecycle.ReasonWaitingForPool
			if j.GetStatus() == string(lifecycle.Pending) && (!acquiring(j) || capped) {
				allWaiting = append(allWaiting, j)
			}
		}
		m.releasePools(ctx, c, allWaiting)
	}
	if full {
		m.sweep(ctx, c)
	}
	m.forgetPools(c)
	m.gauges(c)
	m.report(ctx, c, c.all)
	c.lap("report")
	// What ended this cycle leaves the snapshot now rather than when the
	// feed echoes the write back.
	for _, j := range c.all {
		if !live(j) {
			m.gone(j.GetId())
		}
	}
	m.armEnds(c, todo)
	return c.next, nil
}

// sweep stops, on every cluster whose backend can list what it holds, the
// objects of jobs that are no longer live and that planLeftover says must
// go: on a pooled cluster everything an ended job left (a controller killed
// between a job's outcome and its cleanup), elsewhere what still runs (an
// abort forced while the cluster could not be asked, by a controller that
// has since restarted). It runs on resyncs, when the snapshot holds every
// live job, so a resident missing from it has ended (its row says so, or
// is gone with its experiment).
func (m *Manager) sweep(ctx context.Context, c *cycle) {
	budget := sweepPerCycle
	m.snap.sweepAgain = false
	for _, name := range slices.Sorted(maps.Keys(c.clusters)) {
		cl := c.clusters[name]
		sw, ok := m.backends[cl.GetBackend()].(Sweeper)
		if !ok || c.health[name].Err != nil {
			continue
		}
		_, pooled := m.backends[cl.GetBackend()].(PoolBackend)
		res, err := sw.Residents(cl)
		if err != nil {
			m.snap.sweepAgain = true
			continue
		}
		for _, r := range res {
			if m.snap.jobs[r.JobID] != nil || m.mem.leftovers[r.JobID] != nil || (!pooled && !r.Active) {
				continue // live, already being removed, or a finished Job kept for its user
			}
			if budget--; budget < 0 {
				return // the rest at the next resync: a sweep never holds a cycle up
			}
			j, found, err := m.endedRow(ctx, r.JobID)
			if err != nil {
				continue // the next resync judges it
			}
			if !found {
				j = &falconv1.Job{Id: r.JobID, ClusterName: name}
			}
			if !planLeftover(j, found, pooled, r.Active) {
				continue
			}
			if err := m.backends[cl.GetBackend()].Stop(ctx, cl, j); err != nil {
				m.log.Warn("remove leftovers of an ended job", "job", r.JobID, "cluster", name, "err", err)
				continue
			}
			m.log.Info("removed leftovers of an ended job", "job", r.JobID, "cluster", name, "status", j.GetStatus())
		}
	}
}

// sweepRetry is how soon a resync comes again for a sweep that could not
// see what a cluster holds.
const sweepRetry = 2 * time.Second

// sweepPerCycle bounds the leftovers one resync removes: each costs calls to
// the cluster, and the cycle has queues to hand over.
const sweepPerCycle = 16

// refresh brings the snapshot up to date and says which jobs to look at,
// or that every job is to be looked at (full).
func (m *Manager) refresh(ctx context.Context) (look map[string]bool, full bool, err error) {
	m.touchMu.Lock()
	touched, touchAll := m.touched, m.touchAll
	m.touched, m.touchAll = map[string]bool{}, false
	m.touchMu.Unlock()
	// Ends recorded between cycles (see ends): the rows their writes
	// returned, as the cycle's own writes are folded.
	for _, row := range m.ends.take() {
		m.put(row)
	}
	var exps []string
	since := m.now().Sub(m.snap.resyncedAt)
	// A sweep that could not look asks again soon, not at every cycle: a
	// cluster whose caches never sync must not make every cycle a resync.
	resync := m.follower == nil || since >= m.resyncEvery || (m.snap.sweepAgain && since >= sweepRetry)
	if m.follower != nil {
		var feedResync bool
		exps, feedResync = m.follower.Take()
		resync = resync || feedResync
	}
	if resync {
		if err := m.resync(ctx); err != nil {
			m.requeueTouches(touched, touchAll)
			if m.follower != nil {
				m.follower.Again()
			}
			return nil, false, err
		}
		return touched, true, nil
	}
	read, err := m.readChanged(ctx, exps)
	if err != nil {
		m.requeueTouches(touched, touchAll)
		m.follower.Return(exps)
		return nil, false, err
	}
	for id := range touched {
		read[id] = true
	}
	return read, touchAll, nil
}

// requeueTouches keeps backend reports for the next cycle when this one
// could not read the API server.
func (m *Manager) requeueTouches(touched map[string]bool, all bool) {
	m.touchMu.Lock()
	defer m.touchMu.Unlock()
	for id := range touched {
		m.touched[id] = true
	}
	m.touchAll = m.touchAll || all
}

// acquiring reports whether a Pending job holds its queue's slot (see
// lifecycle.Acquiring, the one definition); the cluster it was picked for
// is recorded in the same write.
func acquiring(j *falconv1.Job) bool {
	return lifecycle.Acquiring(lifecycle.Reason(j.GetReason())) && j.GetClusterName() != ""
}

// outOfService says why the cluster receives no new jobs ("it is in
// maintenance"), or "" while it is active and this controller runs its
// backend. It is the same rule candidates applies as Active.
func (m *Manager) outOfService(c *cycle, name string) string {
	cl := c.clusters[name]
	switch {
	case cl == nil:
		return "it is no longer registered"
	case cl.GetStatus() == store.ClusterMaintenance:
		return "it is in maintenance"
	case cl.GetStatus() == store.ClusterOffline:
		return "it is offline"
	case cl.GetStatus() != store.ClusterActive:
		return fmt.Sprintf("its status is %q", cl.GetStatus())
	}
	if _, ok := m.backends[cl.GetBackend()]; !ok {
		return fmt.Sprintf("this controller does not run its backend %q", cl.GetBackend())
	}
	return ""
}

// requeue takes every waiting job out of a queue whose cluster has left
// service since the job was placed, so that Enqueue selects again as for a
// new job: another active cluster offering its accelerator, or, for a job
// pinned there, a Waiting message saying why it stays. Jobs that hold a
// slot there (acquiring) stay: a cluster out of service receives nothing
// new, but what it already started is watched to the end. Only the
// scheduler's memory changes (a waiting job's queue is not recorded on its
// row), which is why a restarted controller, placing every job afresh,
// reaches the same state.
func (m *Manager) requeue(c *cycle, waiting []*falconv1.Job) {
	for _, j := range waiting {
		key, phase, ok := m.mem.sched.Lookup(j.GetId())
		if !ok || phase != queue.PhaseWaiting {
			continue
		}
		if why := m.outOfService(c, key.Cluster); why != "" {
			m.mem.leaveQueue(j.GetId())
			m.log.Info("waiting job leaves a cluster out of service", "job", j.GetId(), "exp", j.GetExpId(), "cluster", key.Cluster, "why", why)
		}
	}
}

// candidates describes the registered clusters to the scheduler. A cluster
// whose backend this controller does not run receives nothing. A cluster
// that lists no accelerator types (local) offers every type seen this cycle.
func (m *Manager) candidates(clusters []*falconv1.Cluster) []queue.Cluster {
	out := make([]queue.Cluster, 0, len(clusters))
	for _, x := range clusters {
		_, known := m.backends[x.GetBackend()]
		qc := placement.QueueCluster(x)
		qc.Active = known && x.GetStatus() == store.ClusterActive
		out = append(out, qc)
	}
	// A cluster that lists no accelerator types (the local machine) is the
	// fallback: it takes the types no registered cluster offers, so `falcon
	// dev` runs any manifest, yet a TPU job waits for the real TPU clusters
	// when there are any, even while they are in maintenance.
	offered := map[string]bool{}
	for _, qc := range out {
		for t := range qc.Accelerators {
			offered[t] = true
		}
	}
	for i := range out {
		if len(out[i].Accelerators) > 0 {
			continue
		}
		for t := range m.snap.types {
			if !offered[t] {
				out[i].Accelerators[t] = 0
			}
		}
	}
	return out
}

// clusterList is the registry's clusters: read again on every resync and
// once the last read is clusterListAge old, else the last read's. A change
// to a cluster reaches the change feed, which makes the next cycle a
// resync (watch.Follower), so between resyncs the list is at most
// clusterListAge late only for changes no feed carried, which the periodic
// resync is there for anyway; and a cycle that hands a slot over, or
// records a job's end, does not wait for a read that tells it nothing.
func (m *Manager) clusterList(ctx context.Context, full bool) (*falconv1.ListClustersResponse, error) {
	now := m.now()
	if !full && m.snap.clusters != nil && now.Sub(m.snap.clustersAt) < clusterListAge {
		return m.snap.clusters, nil
	}
	cl, err := m.clusters.ListClusters(ctx, &falconv1.ListClustersRequest{})
	if err != nil {
		return nil, err
	}
	m.snap.clusters, m.snap.clustersAt = cl, now
	return cl, nil
}

// clusterListAge bounds how long a cycle reuses the clusters (and their
// probes) an earlier one read.
const clusterListAge = time.Second

// addProbes gives each candidate its cluster's last health probe, for the
// decision record (and PolicyPriority). Probes that cannot be read leave
// the candidates unprobed: a record says "never probed" rather than the
// cycle failing for what only explains. A read less than clusterListAge
// old is used again: probes come every few seconds at most.
func (m *Manager) addProbes(ctx context.Context, cands []queue.Cluster) {
	resp := m.snap.probes
	if now := m.now(); resp == nil || now.Sub(m.snap.probesAt) >= clusterListAge {
		var err error
		if resp, err = m.clusters.ListClusterProbes(ctx, &falconv1.ListClusterProbesRequest{}); err != nil {
			m.log.Debug("list cluster probes", "err", err)
			return
		}
		m.snap.probes, m.snap.probesAt = resp, now
	}
	byName := map[string]*queue.Probe{}
	for _, p := range resp.GetItems() {
		byName[p.GetCluster()] = placement.QueueProbe(p)
	}
	for i := range cands {
		cands[i].Probe = byName[cands[i].Name]
	}
}

// deviceType is the job's accelerator under its canonical name
// (placement.DeviceType).
func deviceType(j *falconv1.Job) string { return placement.DeviceType(j.GetTaskSpec().GetDeviceType()) }

// queueKey names the queue a job waits in on its cluster
// (placement.QueueKey, which says why it groups what it groups).
func queueKey(j *falconv1.Job) string { return placement.QueueKey(j.GetTaskSpec()) }

func schedJob(j *falconv1.Job) queue.Job {
	actor := j.GetCreator()
	if actor == "" {
		actor = "unknown"
	}
	return queue.Job{
		ID: j.GetId(), Actor: actor, Name: j.GetExpName() + "/" + j.GetRole(),
		AcceleratorType: deviceType(j), Topology: queueKey(j), Shape: topologyOrEmpty(j),
		PinnedCluster: pinned(j), Created: j.GetCreatedAt().AsTime(),
	}
}

// pinned is the cluster a waiting job must run on: a cluster name on a job
// that has not been dispatched comes from the experiment's cluster_name.
func pinned(j *falconv1.Job) string {
	if acquiring(j) {
		return ""
	}
	return j.GetClusterName()
}

func (m *Manager) liveJobs(ctx context.Context) ([]*falconv1.Job, error) {
	var out []*falconv1.Job
	token := ""
	for {
		resp, err := m.jobs.ListJobs(ctx, &falconv1.ListJobsRequest{
			Statuses:  []string{string(lifecycle.Pending), string(lifecycle.Running), string(lifecycle.Aborting)},
			PageSize:  1000,
			PageToken: token,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, resp.GetItems()...)
		if token = resp.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

func (m *Manager) backendFor(c *falconv1.Cluster) (Backend, error) {
	if c == nil {
		return nil, fmt.Errorf("cluster is not registered")
	}
	b, ok := m.backends[c.GetBackend()]
	if !ok {
		return nil, fmt.Errorf("cluster %s uses backend %q, which this controller does not run", c.GetName(), c.GetBackend())
	}
	return b, nil
}

// apply writes decision d's status change (whatever its verb) conditional
// on the status the job had when read. Losing that race
// (FailedPrecondition) is normal — usually a user's abort — and is left to
// the next cycle, which reads the row again (changedUnderUs).
func (m *Manager) apply(ctx context.Context, j *falconv1.Job, d decision) bool {
	if !d.changes(j) {
		return true
	}
	return m.write(ctx, j, d.request(j))
}

// write sends req and, when it lands, refreshes j from the stored row.
func (m *Manager) write(ctx context.Context, j *falconv1.Job, req *falconv1.UpdateJobStatusRequest) bool {
	updated, err := m.jobs.UpdateJobStatus(ctx, req)
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition {
			m.changedUnderUs(j, err.Error())
		} else {
			m.log.Warn("update job status", "job", j.GetId(), "to", req.GetStatus(), "err", err)
			m.unsure(j)
		}
		return false
	}
	from := j.GetStatus()
	refresh(j, updated)
	m.logTransition(j, from)
	if st := lifecycle.Status(j.GetStatus()); lifecycle.JobMachine.IsTerminal(st) {
		m.metrics.Finished.WithLabelValues(j.GetClusterName(), j.GetStatus(), j.GetReason()).Inc()
	}
	return true
}

// logTransition logs a job's written status with the job, experiment and
// cluster IDs, so one query over the logs follows a job or an experiment
// through every step. A change of status is an event (info); a new
// Reason or Message within a status, such as a queue position, is
// progress (debug).
func (m *Manager) logTransition(j *falconv1.Job, from string) {
	level := slog.LevelDebug
	if from != j.GetStatus() {
		level = slog.LevelInfo
	}
	m.log.Log(context.Background(), level, "job status", "job", j.GetId(), "exp", j.GetExpId(), "cluster", j.GetClusterName(),
		"from", from, "to", j.GetStatus(), "reason", j.GetReason(), "message", j.GetMessage())
}

func (m *Manager) abort(ctx context.Context, c *cycle, j *falconv1.Job) {
	d := planAbort(j, m.sub.has(j.GetId()))
	msg := d.message
	if d.verb == stopThenRecord {
		var done bool
		if done, msg = m.stop(ctx, c, j, msg); !done {
			return // asked again next cycle (or at the stop's backoff); the job stays Aborting
		}
	}
	if m.apply(ctx, j, recorded(lifecycle.Aborted, "", msg)) {
		m.mem.forgetJob(j.GetId())
		m.log.Info("job aborted", "job", j.GetId(), "exp", j.GetExpId(), "cluster", j.GetClusterName())
	}
}

// stop asks the job's cluster to stop it, and reports whether the caller may
// now record the job's outcome, with the Message to record. A stop that
// fails (the cluster refuses or does not answer, or is backing off) is
// asked again with backoff for Retry.Stop's window; then the outcome is
// recorded anyway, its Message saying that the cluster never confirmed the
// stop, so that no job waits for ever on a cluster that is gone.
func (m *Manager) stop(ctx context.Context, c *cycle, j *falconv1.Job, msg string) (bool, string) {
	name := j.GetClusterName()
	cl := c.clusters[name]
	b, err := m.backendFor(cl)
	if err != nil {
		// Deleted from the registry, or run by no backend here: nothing
		// this controller can ask. Say so rather than wait.
		return true, fmt.Sprintf("%s; cluster %s could not be asked to stop it: %v", msg, name, err)
	}
	prev := m.mem.stopFailing[j.GetId()]
	now := m.now()
	if next, wait := stopWait(prev, now); wait {
		c.deadline(next)
		return false, msg
	}
	h := c.health[name]
	if h.Backoff {
		// The backend paces calls to this cluster itself; the stop is
		// asked the first cycle after its backoff ends.
		err = fmt.Errorf("cluster %s is unreachable: %w", name, h.Err)
	} else {
		err = b.Stop(ctx, cl, j)
	}
	done, outcome, st := planStopOutcome(name, msg, prev, err, h.Backoff, m.retry.Stop, now)
	if st == nil {
		delete(m.mem.stopFailing, j.GetId())
		return done, outcome
	}
	m.mem.stopFailing[j.GetId()] = st
	if !h.Backoff {
		c.deadline(st.next)
	}
	if done {
		m.log.Warn("cluster never confirmed stop; recording the outcome", "job", j.GetId(), "cluster", name, "attempts", st.attempts, "err", err)
		// The outcome is recorded; the stop goes on being asked, with
		// longer gaps, until the cluster confirms it.
		m.mem.leftovers[j.GetId()] = &leftover{job: j, retry: st}
	} else {
		m.log.Warn("stop job failed, retrying", "job", j.GetId(), "cluster", name, "attempt", st.attempts, "err", err)
	}
	return done, outcome
}

// reachedCluster reports whether the job may have left anything on its
// cluster: it began acquiring, ran, or holds a node pool.
func reachedCluster(j *falconv1.Job) bool {
	return j.GetDispatchedAt() != nil || j.GetStartedAt() != nil || j.GetNodePool() != ""
}

// pickAll hands every free slot to its next job, again and again while
// dispatches finish at once (the local backend runs a job immediately,
// releasing the slot in the same cycle). A cluster out of service has no
// waiting jobs left (requeue), and one whose backend is backing off keeps
// them waiting: its dispatch would fail, or hang until the call limit.
func (m *Manager) pickAll(ctx context.Context, c *cycle, byID map[string]*falconv1.Job) {
	if m.closing {
		return // the drain's last cycle (finish)
	}
	for progress := true; progress && ctx.Err() == nil; {
		progress = false
		// One round: every free slot picks its next job; the picks are
		// recorded in one write, submitted concurrently (submission is
		// the slow part: a Kubernetes create each), then driven one by
		// one from what each submission returned.
		var picked []*falconv1.Job
		var reqs []*falconv1.UpdateJobStatusRequest
		for _, key := range m.mem.sched.Ready() {
			if c.health[key.Cluster].Backoff || m.outOfService(c, key.Cluster) != "" {
				continue
			}
			if m.sub.room(key.Cluster) <= 0 {
				continue // its submissions' return picks again (submitter)
			}
			for range cpuBurst {
				sj, ok := m.mem.sched.Pick(key)
				if !ok {
					break
				}
				m.mem.touched[key] = true
				j := byID[sj.ID]
				if j == nil {
					_ = m.mem.sched.Remove(sj.ID)
					continue
				}
				// Picked from the deck, if it was there: from now the cycle
				// submits it, unless the deck did already (submitAll).
				m.deck.drop(j.GetId())
				if j.GetReason() == string(lifecycle.ReasonNext) && j.GetClusterName() == key.Cluster {
					// Its row names the cluster already, so its submission
					// need not wait for the write that records the pick.
					m.submitAhead(ctx, c, j)
				}
				picked = append(picked, j)
				req := m.pickRequest(j, key.Cluster, lifecycle.ReasonDispatching, "submitting to cluster "+key.Cluster)
				reqs = append(reqs, req)
				if !noAcquisition(j) {
					break // it holds the slot until its pods run
				}
				// Acquires nothing: the slot goes to the next job at once,
				// in the same round (see noAcquisition).
				m.mem.leaveQueue(j.GetId())
				m.mem.submitted[j.GetId()] = true
			}
		}
		decked, deckReqs := m.reserveAll(c, byID)
		if len(picked) == 0 && len(decked) == 0 {
			return
		}
		// With the updates queued so far (a slot holder's Running above
		// all, the ends seen, the positions the picks moved): one
		// transaction records the holder's pods running, the pick that
		// takes its slot and the pick ahead of the one after.
		m.queuePositions(c, byID)
		then := m.flush(ctx, c, append(picked, decked...), append(reqs, deckReqs...))
		m.deckAll(c, decked)
		if c.configRead == nil {
			c.configRead = map[string]bool{}
		}
		for _, j := range picked {
			c.configRead[j.GetId()] = acquiring(j)
		}
		var ready []*falconv1.Job
		for _, j := range picked {
			if !acquiring(j) {
				// Aborted meanwhile, or the write failed: look again next
				// cycle, which places it afresh if it still waits.
				_ = m.mem.sched.Remove(j.GetId())
				delete(m.mem.submitted, j.GetId())
				c.look(j)
				c.deadline(m.now())
				c.cur = ""
				continue
			}
			ready = append(ready, j)
		}
		m.submitAll(ctx, c, ready)
		run(then)
		for _, j := range ready {
			if m.sub.busy(j.GetId()) {
				// Handed over: the next cycle that looks at it takes the
				// outcome. A CPU-only job gave its slot back at the pick.
				progress = progress || noAcquisition(j)
				continue
			}
			c.look(j)
			m.acquire(ctx, c, j, true)
			c.cur = ""
			if _, phase, ok := m.mem.sched.Lookup(j.GetId()); !ok || phase != queue.PhaseAcquiring {
				progress = true
			}
		}
	}
}

// pickRequest is the write that records a pick of j for cluster (reason
// Dispatching, or Next for a pick ahead): it brings the job's config back
// for its submission, and carries the record that placed it.
func (m *Manager) pickRequest(j *falconv1.Job, cluster string, reason lifecycle.Reason, msg string) *falconv1.UpdateJobStatusRequest {
	req := &falconv1.UpdateJobStatusRequest{
		Id: j.GetId(), ExpectedStatus: j.GetStatus(), Status: string(lifecycle.Pending),
		Reason: string(reason), Message: msg, ClusterName: cluster, WithConfig: true,
	}
	if sel, ok := m.mem.sched.Selection(j.GetId()); ok {
		req.Selection = placement.SelectionRecord(sel)
	}
	return req
}

// submitAll submits the picked jobs that need no node pool concurrently,
// at most submitPerCluster at a time on one cluster, and leaves each
// outcome in c.submitted for dispatch to take instead of submitting again.
// Everything else a pick decides stays in acquire, one job at a time.
func (m *Manager) submitAll(ctx context.Context, c *cycle, jobs []*falconv1.Job) {
	type sub struct {
		j  *falconv1.Job
		cl *falconv1.Cluster
		b  Backend
	}
	var subs []sub
	for _, j := range jobs {
		cl := c.clusters[j.GetClusterName()]
		if cl == nil {
			continue
		}
		b, err := m.backendFor(cl)
		if err != nil {
			continue
		}
		if pc := c.pools[cl.GetName()]; pc != nil && pc.b.NeedsPool(j) {
			continue // its pool comes first
		}
		if _, failing := m.mem.dispatchFailing[j.GetId()]; failing {
			continue
		}
		if _, starts := b.(Starter); starts {
			continue // started one at a time, in acquire (see Starter)
		}
		if m.sub.has(j.GetId()) {
			continue // the deck submitted it when its holder ran
		}
		subs = append(subs, sub{j, cl, b})
	}
	if m.sub != nil {
		for _, s := range subs {
			j := cloneJob(s.j) // the cycle goes on writing s.j
			configRead := c.configRead[j.GetId()]
			m.sub.start(ctx, s.cl.GetName(), j.GetId(), func(ctx context.Context) error {
				return m.submit(ctx, s.cl, s.b, j, configRead)
			})
		}
		return
	}
	if len(subs) < 2 {
		return // nothing to overlap
	}
	if c.submitted == nil {
		c.submitted = map[string]error{}
	}
	sems := map[string]chan struct{}{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range subs {
		sem := sems[s.cl.GetName()]
		if sem == nil {
			sem = make(chan struct{}, submitPerCluster)
			sems[s.cl.GetName()] = sem
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			err := m.submit(ctx, s.cl, s.b, s.j, c.configRead[s.j.GetId()])
			mu.Lock()
			c.submitted[s.j.GetId()] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// submitPerCluster bounds the concurrent submissions to one cluster, so a
// burst of picks does not hammer its apiserver (whose client is also rate
// limited, kube.ClusterQPS). Eight, not four: a thousand CPU-only
// experiments went out at 60 Jobs/s instead of 49 (BenchmarkKubeDispatchCPU,
// the plain baseline moving with it).
const submitPerCluster = 8

// cpuBurst is how many CPU-only jobs one queue hands out per round: they
// hold no slot, so the picks of a burst are written in one batch and
// submitted together rather than one round each.
const cpuBurst = 16

// acquire drives a job that holds its queue's slot: dispatch it if the
// cluster has no trace of it, then act on what the cluster reports. fresh
// means the job was picked from its queue this cycle: it cannot have
// reached its cluster yet, so there is nothing to observe before
// dispatching (and Dispatch is idempotent should that ever be wrong).
func (m *Manager) acquire(ctx context.Context, c *cycle, j *falconv1.Job, fresh bool) {
	cl := c.clusters[j.GetClusterName()]
	key := queue.Key{Cluster: j.GetClusterName(), Topology: queueKey(j)}
	if m.mem.submitted[j.GetId()] {
		// Submitted without acquiring anything: its slot went to the next.
	} else if err := m.mem.sched.MarkAcquiring(schedJob(j), key); err != nil && !errors.Is(err, queue.ErrConflict) {
		m.log.Debug("mark acquiring", "job", j.GetId(), "err", err)
	}
	if returned, err := m.sub.take(j.GetId()); returned {
		// Its submission came back (submitter): decide on it as if it had
		// returned in this cycle.
		if c.submitted == nil {
			c.submitted = map[string]error{}
		}
		c.submitted[j.GetId()] = err
		fresh = true
	}
	b, unusable := m.backendFor(cl)
	f := acquiringFacts{job: j, cluster: j.GetClusterName(), registered: cl != nil, unusable: unusable,
		failing: m.mem.dispatchFailing[j.GetId()], retry: m.retry.Dispatch, health: c.health[j.GetClusterName()], now: m.now()}
	if d := j.GetDispatchedAt(); d != nil {
		// The row records when acquiring began, so a restarted controller
		// keeps the deadline; the scheduler's clock is only the fallback.
		f.since = d.AsTime()
	} else if j.GetTaskSpec().GetTimeoutSeconds() > 0 {
		// A look through every queue, made only where a timeout needs
		// it: without a start, the progress grace writes at once.
		f.since = m.acquiringSince(key, j.GetId())
	}
	d := planAcquiring(f)
	c.deadline(d.deadline)
	switch d.verb {
	case keep:
		if unusable != nil {
			m.log.Warn("job acquiring on an unusable cluster", "job", j.GetId(), "err", unusable)
		}
		return
	case record:
		m.record(ctx, j, d)
		return
	case giveUp:
		m.giveUpDispatch(ctx, c, cl, b, j, d.message)
		return
	case stopThenRecord:
		m.stopAndFail(ctx, c, j, d)
		return
	}
	if pc := c.pools[cl.GetName()]; pc != nil && pc.b.NeedsPool(j) {
		if !m.acquirePool(ctx, c, pc, j) {
			return
		}
		fresh = false // the pool may have been the job's for a while
	}
	obs := Observation{Phase: PhaseUnknown}
	dispatched := false
	if !fresh {
		var err error
		if obs, err = b.Observe(ctx, cl, j); err != nil {
			m.log.Warn("observe job", "job", j.GetId(), "cluster", cl.GetName(), "err", err)
			return
		}
	}
	if obs.Phase == PhaseUnknown {
		if err := m.dispatch(ctx, c, cl, b, j); err != nil {
			return
		}
		dispatched = true
		var err error
		if obs, err = b.Observe(ctx, cl, j); err != nil {
			return
		}
	}
	running := func() {
		m.mem.leaveQueue(j.GetId()) // releases the slot
		delete(m.mem.submitted, j.GetId())
		m.metrics.Dispatched.WithLabelValues(cl.GetName()).Inc()
		if t := j.GetCreatedAt(); t != nil {
			m.metrics.DispatchLatency.WithLabelValues(cl.GetName()).Observe(m.now().Sub(t.AsTime()).Seconds())
		}
		m.log.Info("job running", "job", j.GetId(), "exp", j.GetExpId(), "cluster", cl.GetName())
	}
	// A job that holds no slot (submitted, acquiring nothing) has no queue
	// waiting on its write: its news goes in the cycle's batch (flush), so
	// a burst of them costs one write, not one each. A slot holder's is
	// written now, for the next pick of its queue to follow in this cycle.
	batched := m.mem.submitted[j.GetId()]
	switch d := planObserved(obs); d.to {
	case lifecycle.Running:
		if batched {
			c.later(j, d, func() {
				running()
				// Its deadline is now its run's timeout, not acquiring's.
				c.look(j)
				if d := planRunning(runningFacts{job: j, now: m.now()}); d.verb == stopThenRecord {
					c.deadline(m.now()) // timed out already: the next cycle stops it
				} else {
					c.deadline(d.deadline)
				}
				c.cur = ""
			})
		} else {
			// Its slot goes to the next job now: the pick's write carries
			// this one (pickAll), so both land or neither does, and the
			// handover costs one write, not two in a row. Not written
			// (aborted meanwhile, or the write failed), it is looked at
			// again next cycle, which takes the slot back if it still
			// acquires.
			m.mem.leaveQueue(j.GetId())
			c.later(j, d, running)
		}
	case lifecycle.Succeeded:
		// Finished before we saw it run: pass through Running.
		if m.apply(ctx, j, planPassThrough(obs)) && m.apply(ctx, j, d) {
			m.mem.forgetJob(j.GetId())
			m.cleanUp(ctx, cl, b, j)
		}
	case lifecycle.Failed:
		m.stopAndFail(ctx, c, j, d)
	default:
		// Just submitted and not running yet: the row already says it is
		// being submitted, and the cluster's first report of its pods
		// (an informer event) brings their account, so no write now.
		if dispatched && j.GetReason() == string(lifecycle.ReasonDispatching) {
			// nothing to write
		} else if batched || !noAcquisition(j) {
			if at := planProgress(f.since, m.now()); !at.IsZero() && j.GetReason() == string(lifecycle.ReasonDispatching) {
				// Too early to be news: pods that start at once run
				// before then, and their Running would overwrite it.
				// Looked at again then, it is written if they still do
				// not run.
				c.deadline(at)
				break
			}
			// Nothing this cycle decides follows from its news (a holder
			// keeps its slot until its pods run), so it goes in the
			// cycle's batch rather than a write of its own.
			c.later(j, d, nil)
			break
		} else if !m.apply(ctx, j, d) {
			break
		}
		if noAcquisition(j) && !batched {
			// Its cluster holds it now, and nothing is left to acquire:
			// the next job of its queue need not wait for its pods.
			m.mem.leaveQueue(j.GetId())
			m.mem.submitted[j.GetId()] = true
		}
	}
}

// noAcquisition reports whether a job acquires nothing before it runs: a
// CPU-only job runs on the cluster's standing nodes, so there is no pool
// to create and no slice to wait for, and the one-acquiring-job rule of
// 000 section 4, which serializes acquiring slices of one topology, has
// nothing to serialize. Its queue still orders submissions fairly (the
// pick rule); the slot is handed on once the cluster has the job, not once
// its pods run.
func noAcquisition(j *falconv1.Job) bool { return queueKey(j) == "cpu" }

// record writes a decision that needs no stop: a failure takes the job out
// of its queue.
func (m *Manager) record(ctx context.Context, j *falconv1.Job, d decision) {
	if d.to == lifecycle.Failed {
		m.fail(ctx, j, d)
		return
	}
	m.apply(ctx, j, d)
}

func (m *Manager) acquiringSince(key queue.Key, id string) time.Time {
	for _, st := range m.mem.sched.Snapshot() {
		if st.Key == key && st.Acquiring.ID == id {
			return st.AcquiringSince
		}
	}
	return time.Time{}
}

// dispatch submits the job with its experiment's config (which GetJob carries).
func (m *Manager) dispatch(ctx context.Context, c *cycle, cl *falconv1.Cluster, b Backend, j *falconv1.Job) error {
	err, done := c.submitted[j.GetId()]
	delete(c.submitted, j.GetId())
	if !done {
		err = m.submit(ctx, cl, b, j, c.configRead[j.GetId()])
	}
	d, f := planDispatch(cl.GetName(), err, m.mem.dispatchFailing[j.GetId()], m.retry.Dispatch, m.now())
	if f == nil {
		delete(m.mem.dispatchFailing, j.GetId())
	} else {
		m.mem.dispatchFailing[j.GetId()] = f
		c.deadline(f.next)
	}
	switch d.verb {
	case proceed:
		return nil
	case keep:
		return err // aborted meanwhile: the next cycle sees it
	case record:
		if d.to == lifecycle.Failed {
			m.log.Warn("dispatch failed: cluster unusable", "job", j.GetId(), "cluster", cl.GetName(), "err", err)
		} else {
			m.log.Warn("dispatch failed, retrying", "job", j.GetId(), "cluster", cl.GetName(), "err", err)
		}
		m.record(ctx, j, d)
		return err
	}
	m.log.Warn("dispatch failed", "job", j.GetId(), "exp", j.GetExpId(), "cluster", cl.GetName(), "err", err)
	m.stopAndFail(ctx, c, j, d)
	return err
}

// submit reads the job's config (a list does not carry it) unless it
// came with the write of the pick (configRead), and hands the job to its
// backend. It only does I/O: dispatch decides what the outcome means.
func (m *Manager) submit(ctx context.Context, cl *falconv1.Cluster, b Backend, j *falconv1.Job, configRead bool) error {
	if j.GetConfig() == "" && !configRead {
		full, err := m.jobs.GetJob(ctx, &falconv1.GetJobRequest{Id: j.GetId()})
		if err != nil {
			m.log.Warn("get job", "job", j.GetId(), "err", err)
			return &changedError{err}
		}
		if full.GetStatus() != j.GetStatus() {
			return &changedError{fmt.Errorf("job %s changed to %s", j.GetId(), full.GetStatus())} // aborted meanwhile
		}
		j.Config = full.GetConfig()
	}
	return b.Dispatch(ctx, cl, j)
}

// changedError is a submission that did not reach the backend: the job's
// row could not be read, or it changed since the cycle read it.
type changedError struct{ err error }

func (e *changedError) Error() string { return e.err.Error() }

// giveUpDispatch fails a job whose dispatch has failed for its retry window
// (Retry.Dispatch). Every create failed, so normally nothing exists on the
// cluster; it is stopped all the same when the cluster answers, and
// when it does not, the job fails anyway rather than hold its queue.
func (m *Manager) giveUpDispatch(ctx context.Context, c *cycle, cl *falconv1.Cluster, b Backend, j *falconv1.Job, msg string) {
	switch {
	case c.health[cl.GetName()].Backoff:
		msg += fmt.Sprintf("; cluster %s could not be asked to remove anything a create may have left", cl.GetName())
	default:
		// One try: the job has waited its window already, and a cluster
		// that refuses this too is the same outage.
		if err := b.Stop(ctx, cl, j); err != nil {
			msg += fmt.Sprintf("; cluster %s could not be asked to remove anything a create may have left: %v", cl.GetName(), err)
		}
	}
	m.fail(ctx, j, recorded(lifecycle.Failed, lifecycle.ReasonJobSubmitFailed, msg))
}

// cleanUp removes what a succeeded job left on a cluster whose pools are
// shared (its Kubernetes Job and pods), before its pool goes to the next
// job. The outcome is written first, so it is never lost; if this fails
// (or the controller dies first), the Job's TTL removes it later.
func (m *Manager) cleanUp(ctx context.Context, cl *falconv1.Cluster, b Backend, j *falconv1.Job) {
	if _, pooled := b.(PoolBackend); !pooled {
		return
	}
	if err := b.Stop(ctx, cl, j); err != nil {
		m.log.Warn("delete finished job from its cluster", "job", j.GetId(), "cluster", cl.GetName(), "err", err)
	}
}

// stopAndFail cleans up whatever the job left on its cluster and fails it
// as d says (see stop: a cluster that never confirms does not hold the job
// for ever, and the Message then says so).
func (m *Manager) stopAndFail(ctx context.Context, c *cycle, j *falconv1.Job, d decision) {
	done, msg := m.stop(ctx, c, j, d.message)
	if !done {
		return
	}
	d.message = msg
	m.fail(ctx, j, d)
}

// fail records the job Failed as d says and takes it out of its queue.
func (m *Manager) fail(ctx context.Context, j *falconv1.Job, d decision) {
	d.verb, d.to = record, lifecycle.Failed
	if m.apply(ctx, j, d) {
		m.mem.forgetJob(j.GetId())
	}
}

// queuePositions queues (for flush) where the waiting jobs of every queue
// that changed stand (on a resync's first call: of every queue): the next
// in line at once, the rest when their refresh is due (planPositions), so
// a burst of handovers in one queue costs one write for those behind, not
// one per step. They go in the write that records the picks that moved
// them, so a handover is one write however many jobs it tells. A queue
// whose front is not due yet stays touched, and the cycle asks to be woken
// when it is.
//
// A job waiting on a cluster its backend cannot reach says so: otherwise it
// would only see its queue not move.
func (m *Manager) queuePositions(c *cycle, byID map[string]*falconv1.Job) {
	all := c.full && !c.positioned
	c.positioned = true
	now := m.now()
	queues := map[queue.Key]bool{}
	for _, key := range m.mem.sched.Keys() {
		queues[key] = true
		refreshTail := now.Sub(m.mem.tailWritten[key]) >= tailRefresh
		touched := m.mem.touched[key]
		if !all && !refreshTail && !touched {
			continue // nothing moved in this queue
		}
		refreshNear := refreshTail || now.Sub(m.mem.nearWritten[key]) >= nearRefresh
		if refreshNear {
			m.mem.nearWritten[key] = now
			delete(m.mem.touched, key)
		} else {
			// The rest of the front is told at its next refresh, in one
			// write with whatever else moved by then.
			c.deadline(m.mem.nearWritten[key].Add(nearRefresh))
		}
		m.waiting = m.mem.sched.AppendWaiting(m.waiting[:0], key)
		for _, w := range planPositions(queueFacts{
			cluster: key.Cluster, waiting: m.waiting, jobs: byID, written: m.mem.positions,
			unreachable: c.health[key.Cluster].Err, refreshNear: refreshNear, refreshTail: refreshTail,
		}) {
			req := &falconv1.UpdateJobStatusRequest{
				Id: w.job.GetId(), ExpectedStatus: w.job.GetStatus(), Status: string(lifecycle.Pending),
				Reason: string(lifecycle.ReasonWaiting), Message: w.msg,
			}
			// A job's first position in this queue carries the record that
			// placed it there, so a waiting job can say where and why
			// (falcon exp explain); the pick writes it again.
			if w.job.GetSelection().GetSelectedCluster() != key.Cluster {
				if sel, ok := m.mem.sched.Selection(w.job.GetId()); ok {
					req.Selection = placement.SelectionRecord(sel)
				}
			}
			j, pos := w.job, w.pos
			c.writes = append(c.writes, deferred{j: j, req: req, then: func() { m.mem.positions[j.GetId()] = pos }})
		}
		if refreshTail {
			m.mem.tailWritten[key] = now
		}
	}
	for key := range m.mem.touched {
		if !queues[key] {
			delete(m.mem.touched, key) // the queue is gone: nobody to tell
		}
	}
}

// refresh replaces j with the row as written, keeping the experiment config
// a list does not carry.
func refresh(j, updated *falconv1.Job) {
	config := j.GetConfig()
	proto.Reset(j)
	proto.Merge(j, updated)
	if j.Config == "" {
		j.Config = config
	}
}

// changedUnderUs notes a conditional write the store refused: the row is
// no longer what the snapshot holds (usually a user's abort). The next
// cycle reads the job's experiment again rather than wait for the change
// feed to name it, so a snapshot that missed a change (a write made
// through another server, or one the feed has not delivered yet) is put
// right by the write it spoiled and never retried against a stale row.
func (m *Manager) changedUnderUs(j *falconv1.Job, why string) {
	m.log.Debug("job changed under us; next cycle reads it again", "job", j.GetId(), "err", why)
	if m.follower != nil {
		m.follower.Return([]string{j.GetExpId()})
	}
}

// unsure reads jobs again next cycle: a write of theirs failed without an
// answer, so it may have landed or not, and the feed's echo of it, which
// the follower skips (watch.Skip), would not say.
func (m *Manager) unsure(jobs ...*falconv1.Job) {
	if m.follower == nil {
		return
	}
	exps := make([]string, 0, len(jobs))
	for _, j := range jobs {
		exps = append(exps, j.GetExpId())
	}
	m.follower.Return(exps)
}

// batchSize is how many updates go in one UpdateJobStatuses call.
const batchSize = 500

// writeBatch sends reqs (reqs[i] updates jobs[i]) in batches and refreshes
// each job that was written. A refused update, usually a job aborted since
// it was read, is read again and left to the next cycle (changedUnderUs).
// An update with with_config (a pick's) brings its job's config back,
// sparing submit its read.
func (m *Manager) writeBatch(ctx context.Context, jobs []*falconv1.Job, reqs []*falconv1.UpdateJobStatusRequest) {
	for start := 0; start < len(reqs); start += batchSize {
		end := min(start+batchSize, len(reqs))
		resp, err := m.jobs.UpdateJobStatuses(ctx, &falconv1.UpdateJobStatusesRequest{Updates: reqs[start:end]})
		if err != nil {
			m.log.Warn("update job statuses", "jobs", end-start, "err", err)
			m.unsure(jobs[start:]...)
			return
		}
		for i, r := range resp.GetResults() {
			j := jobs[start+i]
			if r.GetJob() == nil {
				m.changedUnderUs(j, r.GetMessage())
				continue
			}
			from := j.GetStatus()
			refresh(j, r.GetJob())
			m.logTransition(j, from)
		}
	}
}

func (m *Manager) observeRunning(ctx context.Context, c *cycle, j *falconv1.Job) {
	if m.ends.busy(j.GetId()) {
		// Its end is being written between cycles; the next cycle folds
		// the row (or, if the write did not land, looks at it again).
		return
	}
	cl := c.clusters[j.GetClusterName()]
	b, unusable := m.backendFor(cl)
	d := planRunning(runningFacts{job: j, unusable: unusable, health: c.health[j.GetClusterName()], now: m.now()})
	c.deadline(d.deadline)
	switch d.verb {
	case keep:
		if unusable != nil {
			m.log.Warn("running job on unusable cluster", "job", j.GetId(), "cluster", j.GetClusterName(), "err", unusable)
		}
		return
	case stopThenRecord:
		m.stopAndFail(ctx, c, j, d)
		return
	}
	obs, err := b.Observe(ctx, cl, j)
	if err != nil {
		m.log.Warn("observe job", "job", j.GetId(), "err", err)
		return
	}
	switch d := planRunningObserved(obs); {
	case d.verb == stopThenRecord:
		m.stopAndFail(ctx, c, j, d)
	case d.to == lifecycle.Succeeded:
		c.later(j, d, func() { m.cleanUp(ctx, cl, b, j) })
	default:
		c.later(j, d, nil)
	}
}

// armEnds hands ends (see ends) every job looked at this cycle that is
// Running now on a cluster with a usable backend: its success is recorded
// the moment the backend reports it.
func (m *Manager) armEnds(c *cycle, looked []*falconv1.Job) {
	for _, j := range looked {
		if j.GetStatus() != string(lifecycle.Running) {
			continue
		}
		cl := c.clusters[j.GetClusterName()]
		b, err := m.backendFor(cl)
		if err != nil {
			continue
		}
		m.ends.arm(j, cl, b)
	}
}
