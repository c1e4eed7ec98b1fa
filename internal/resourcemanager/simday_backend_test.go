package resourcemanager_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/resourcemanager"
)

// simClock is the simulated day's virtual clock, read by the manager, the
// API server, the store and the simulated backend. Only the driver moves it.
type simClock struct{ ns atomic.Int64 }

func (c *simClock) Now() time.Time  { return time.Unix(0, c.ns.Load()).UTC() }
func (c *simClock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }

// simPoolDeleteTime is how long a simulated pool takes to go away.
const simPoolDeleteTime = 2 * time.Minute

// simPool is one node pool of the simulated GKE, with its whole history.
type simPool struct {
	cluster, name   string
	accel, topology string
	nodes           int64
	createdFor      string
	requested       time.Time // ProvisionPool created it
	readyAt         time.Time
	deletingAt      time.Time // DeletePool accepted; zero before
	goneAt          time.Time // removed from the listing
	runs            []*simRun // jobs dispatched onto it, in order
}

func (p *simPool) deleting() bool           { return !p.deletingAt.IsZero() }
func (p *simPool) ready(now time.Time) bool { return !now.Before(p.readyAt) && !p.deleting() }
func (p *simPool) gone(now time.Time) bool  { return p.deleting() && !now.Before(p.goneAt) }

// live is the run on the pool whose pods are still running at now.
func (p *simPool) live(now time.Time) *simRun {
	for _, r := range p.runs {
		if r.live(now) {
			return r
		}
	}
	return nil
}

// simRun is one dispatched job.
type simRun struct {
	jobID   string
	idx     int // index in the trace
	cluster string
	pool    string
	start   time.Time
	end     time.Time
	stopped bool
}

func (r *simRun) live(now time.Time) bool { return !r.stopped && now.Before(r.end) }

// simBackend is a strict, virtual-time GKE: node pools take the trace's
// creation latency to become ready and two minutes to delete; a dispatched
// job runs for its trace duration. Anything the manager does that a real
// cluster would punish (a job on a pool that is not ready, of the wrong
// shape, or already busy; deleting a pool under a running job) is recorded
// as a violation, which fails the simulation.
type simBackend struct {
	clock *simClock
	// byName maps an experiment name to its trace entry.
	byName map[string]*simTraceJob

	mu         sync.Mutex
	pools      map[string]map[string]*simPool // cluster -> name -> pool
	allPools   []*simPool                     // in creation order
	runs       map[string]*simRun             // by job ID
	violations []string
	mutations  int // calls that changed the simulated world
	stops      int
	busyDenied int // DeletePool refused with ErrPoolBusy
}

var _ resourcemanager.PoolBackend = (*simBackend)(nil)

func newSimBackend(clock *simClock, trace []simTraceJob) *simBackend {
	s := &simBackend{
		clock:  clock,
		byName: map[string]*simTraceJob{},
		pools:  map[string]map[string]*simPool{},
		runs:   map[string]*simRun{},
	}
	for i := range trace {
		s.byName[trace[i].name] = &trace[i]
	}
	return s
}

func (s *simBackend) violate(format string, args ...any) error {
	msg := fmt.Sprintf("%s: ", s.clock.Now().Format("15:04:05")) + fmt.Sprintf(format, args...)
	s.violations = append(s.violations, msg)
	return fmt.Errorf("simulated cluster refuses: %s", msg)
}

// Violations returns what the manager did wrong so far.
func (s *simBackend) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

// Mutations counts the calls that changed the simulated world.
func (s *simBackend) Mutations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mutations
}

func (s *simBackend) trace(j *falconv1.Job) (*simTraceJob, error) {
	tj := s.byName[j.GetExpName()]
	if tj == nil {
		return nil, s.violate("job %s (experiment %q) is not in the trace", j.GetId(), j.GetExpName())
	}
	return tj, nil
}

func simPoolName(jobID string) string { return "falcon-" + strings.ToLower(jobID) }

// ProvisionPool creates the job's pool, ready after the trace's latency.
// NeedsPool: every simulated job is a TPU slice.
func (s *simBackend) NeedsPool(*falconv1.Job) bool { return true }

func (s *simBackend) ProvisionPool(_ context.Context, cl *falconv1.Cluster, j *falconv1.Job) (resourcemanager.Provisioning, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	name := simPoolName(j.GetId())
	if p := s.pools[cl.GetName()][name]; p != nil && !p.gone(now) {
		if p.deleting() {
			return resourcemanager.Provisioning{}, fmt.Errorf("node pool %s is being deleted", name)
		}
		return resourcemanager.Provisioning{Pool: name, Reason: lifecycle.ReasonProvisioning, Message: "adopting node pool " + name}, nil
	}
	tj, err := s.trace(j)
	if err != nil {
		return resourcemanager.Provisioning{}, &resourcemanager.PoolError{Reason: lifecycle.ReasonNodePoolFailed, Message: err.Error()}
	}
	ts := j.GetTaskSpec()
	sl, err := accelerator.Resolve(ts.GetDeviceType(), ts.GetDeviceTopo(), int(ts.GetReplica()), int(ts.GetDeviceCount()))
	if err != nil {
		return resourcemanager.Provisioning{}, &resourcemanager.PoolError{Reason: lifecycle.ReasonNodePoolFailed, Message: "no node pool fits the task: " + err.Error()}
	}
	p := &simPool{
		cluster: cl.GetName(), name: name, accel: sl.Spec.Name, topology: sl.Topology, nodes: int64(sl.Hosts),
		createdFor: j.GetId(), requested: now, readyAt: now.Add(tj.createLatency),
	}
	if s.pools[cl.GetName()] == nil {
		s.pools[cl.GetName()] = map[string]*simPool{}
	}
	s.pools[cl.GetName()][name] = p
	s.allPools = append(s.allPools, p)
	s.mutations++
	return resourcemanager.Provisioning{Pool: name, Reason: lifecycle.ReasonProvisioning,
		Message: fmt.Sprintf("creating node pool %s (%s %s, %d nodes)", name, p.accel, p.topology, p.nodes)}, nil
}

// CheckPool reports the pool ready once its creation latency has passed.
func (s *simBackend) CheckPool(_ context.Context, cl *falconv1.Cluster, pool string) (resourcemanager.PoolCheck, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	p := s.pools[cl.GetName()][pool]
	if p == nil || p.gone(now) {
		return resourcemanager.PoolCheck{}, &resourcemanager.PoolError{Reason: lifecycle.ReasonNodePoolFailed, Message: "node pool " + pool + " does not exist"}
	}
	if p.deleting() {
		return resourcemanager.PoolCheck{}, &resourcemanager.PoolError{Reason: lifecycle.ReasonNodePoolFailed, Message: "node pool " + pool + " is being deleted"}
	}
	return resourcemanager.PoolCheck{Ready: p.ready(now)}, nil
}

// ListPools lists the pools that exist, by name.
func (s *simBackend) ListPools(_ context.Context, cl *falconv1.Cluster) ([]resourcemanager.Pool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	var out []resourcemanager.Pool
	for _, p := range s.pools[cl.GetName()] {
		if p.gone(now) {
			continue
		}
		st, status := lifecycle.PoolProvisioning, "PROVISIONING"
		switch {
		case p.deleting():
			st, status = lifecycle.PoolDeleting, "STOPPING"
		case p.ready(now):
			st, status = lifecycle.PoolReady, "RUNNING"
		}
		out = append(out, resourcemanager.Pool{
			Name: p.name, AcceleratorType: p.accel, Topology: p.topology, Nodes: p.nodes,
			State: st, Status: status, SupplyMode: "reservation", CreatedFor: p.createdFor, CreatedAt: p.requested,
		})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// DeletePool starts deleting a pool; GKE refuses while the create runs.
func (s *simBackend) DeletePool(_ context.Context, cl *falconv1.Cluster, pool string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	p := s.pools[cl.GetName()][pool]
	if p == nil || p.gone(now) || p.deleting() {
		return nil
	}
	if r := p.live(now); r != nil {
		return s.violate("DeletePool %s/%s while job %s (trace #%d) runs on it until %s", cl.GetName(), pool, r.jobID, r.idx, r.end.Format("15:04:05"))
	}
	if !p.ready(now) {
		s.busyDenied++
		return fmt.Errorf("%w: node pool %s is still being created", resourcemanager.ErrPoolBusy, pool)
	}
	p.deletingAt, p.goneAt = now, now.Add(simPoolDeleteTime)
	s.mutations++
	return nil
}

// Reservation: the simulated clusters have none.
func (s *simBackend) Reservation(context.Context, *falconv1.Cluster) (*falconv1.ReservationCapacity, error) {
	return nil, nil
}

// Dispatch starts the job on its node pool, which must be a ready pool of
// the job's shape that no other job runs on.
func (s *simBackend) Dispatch(_ context.Context, cl *falconv1.Cluster, j *falconv1.Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if _, ok := s.runs[j.GetId()]; ok {
		return nil
	}
	tj, err := s.trace(j)
	if err != nil {
		return err
	}
	name := j.GetNodePool()
	if name == "" {
		return s.violate("Dispatch of job %s (trace #%d) without a node pool", j.GetId(), tj.idx)
	}
	p := s.pools[cl.GetName()][name]
	switch {
	case p == nil || p.gone(now):
		return s.violate("Dispatch of job %s (trace #%d) onto node pool %s/%s, which does not exist", j.GetId(), tj.idx, cl.GetName(), name)
	case p.deleting():
		return s.violate("Dispatch of job %s (trace #%d) onto node pool %s/%s, which is being deleted", j.GetId(), tj.idx, cl.GetName(), name)
	case !p.ready(now):
		return s.violate("Dispatch of job %s (trace #%d) onto node pool %s/%s, which is ready only at %s", j.GetId(), tj.idx, cl.GetName(), name, p.readyAt.Format("15:04:05"))
	case p.accel != "v5p" || p.topology != tj.topology || p.nodes != int64(tj.hosts):
		return s.violate("Dispatch of job %s (trace #%d, v5p %s, %d hosts) onto node pool %s (%s %s, %d nodes)", j.GetId(), tj.idx, tj.topology, tj.hosts, name, p.accel, p.topology, p.nodes)
	}
	if r := p.live(now); r != nil {
		return s.violate("Dispatch of job %s (trace #%d) onto node pool %s/%s, where job %s (trace #%d) runs until %s", j.GetId(), tj.idx, cl.GetName(), name, r.jobID, r.idx, r.end.Format("15:04:05"))
	}
	r := &simRun{jobID: j.GetId(), idx: tj.idx, cluster: cl.GetName(), pool: name, start: now, end: now.Add(tj.duration)}
	s.runs[j.GetId()] = r
	p.runs = append(p.runs, r)
	s.mutations++
	return nil
}

// Observe reports Running from dispatch until the trace duration has
// passed, then Succeeded.
func (s *simBackend) Observe(_ context.Context, _ *falconv1.Cluster, j *falconv1.Job) (resourcemanager.Observation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[j.GetId()]
	switch {
	case !ok:
		return resourcemanager.Observation{Phase: resourcemanager.PhaseUnknown}, nil
	case r.stopped:
		return resourcemanager.Observation{Phase: resourcemanager.PhaseFailed, Message: "stopped"}, nil
	case r.live(s.clock.Now()):
		return resourcemanager.Observation{Phase: resourcemanager.PhaseRunning, Message: fmt.Sprintf("%d/%d pods running", j.GetReplica(), j.GetReplica())}, nil
	}
	return resourcemanager.Observation{Phase: resourcemanager.PhaseSucceeded, Message: "completed"}, nil
}

// Stop kills the job. Removing a finished job (the manager cleans up after
// success) is fine; killing a running one is not: nothing in the trace
// should need it.
func (s *simBackend) Stop(_ context.Context, _ *falconv1.Cluster, j *falconv1.Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runs[j.GetId()]; ok && !r.stopped {
		now := s.clock.Now()
		if now.Before(r.end) {
			s.stops++
		}
		r.stopped = true
		if now.Before(r.end) {
			r.end = now
		}
		s.mutations++
	}
	return nil
}

// nextEvent is the earliest moment after now at which the simulated world
// changes on its own: a pool becomes ready or disappears, a job finishes.
func (s *simBackend) nextEvent(now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, p := range s.allPools {
		if !p.deleting() {
			consider(p.readyAt)
		} else {
			consider(p.goneAt)
		}
	}
	for _, r := range s.runs {
		if !r.stopped {
			consider(r.end)
		}
	}
	return next
}

// livePools counts pools that still exist at now.
func (s *simBackend) livePools(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.allPools {
		if !p.gone(now) {
			n++
		}
	}
	return n
}

// runningJobs counts dispatched jobs whose pods still run at now.
func (s *simBackend) runningJobs(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.runs {
		if r.live(now) {
			n++
		}
	}
	return n
}
