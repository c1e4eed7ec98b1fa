package queue

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Pool is the shape of a node pool.
type Pool struct {
	AcceleratorType string
	Topology        string
}

// Cluster is what selection needs to know of a candidate cluster. The caller
// builds it from the registry and the node-pool inventory each cycle.
type Cluster struct {
	Name string
	// Active is false in maintenance or offline: such a cluster receives
	// no new jobs. Jobs already waiting in its queues stay there until the
	// caller takes them out (Remove) to select again.
	Active bool
	// Accelerators maps each accelerator type the cluster offers to its
	// priority for that type; higher is preferred when all else is equal.
	Accelerators map[string]int
	// IdlePools counts node pools kept alive by delayed deletion, by shape.
	// Reusing one saves the 5-10 minutes of creating a pool.
	IdlePools map[Pool]int
	// MaxQueueDepth bounds waiting plus acquiring jobs per topology queue;
	// 0 means unbounded.
	MaxQueueDepth int
	// RegistryPriority is the registry's priority for each type as people
	// write it (1 first). It is only recorded and shown in a Selection,
	// where "priority 1" reads better than Accelerators' "-1"; a type
	// missing here is shown with its Accelerators value.
	RegistryPriority map[string]int
	// Probe is the cluster's last health probe; nil when it was never
	// probed. PolicyPriority takes only clusters whose probe answered;
	// PolicySpread records it without deciding on it.
	Probe *Probe
}

// Probe is one health probe of a cluster (design 001's ClusterProbeResult).
type Probe struct {
	Reachable bool
	// QueueDepth and RunningCount are the cluster's own counts of
	// workloads waiting and running; meaningful only when Reachable.
	QueueDepth   int
	RunningCount int
	Error        string // why not reachable
	ProbedAt     time.Time
}

// String is the probe as one clause of a record or error:
// "reachable, queue_depth=2, running=1 (probed 2026-01-02T03:04:05Z)" or
// "unreachable: probe timed out after 3s (probed ...)".
func (p *Probe) String() string {
	if p == nil {
		return "never probed"
	}
	at := p.ProbedAt.UTC().Format(time.RFC3339)
	if !p.Reachable {
		return fmt.Sprintf("unreachable: %s (probed %s)", cmp.Or(p.Error, "no answer"), at)
	}
	return fmt.Sprintf("reachable, queue_depth=%d, running=%d (probed %s)", p.QueueDepth, p.RunningCount, at)
}

// Policy is how Select ranks the clusters that can take a job.
type Policy string

const (
	// PolicySpread is design 000's, the default: an idle node pool of the
	// job's shape first, then the shortest of Falcon's own queues, then
	// priority, then name. Probes are recorded but do not decide: a cluster
	// Falcon cannot reach keeps its jobs waiting until it answers.
	PolicySpread Policy = "spread"
	// PolicyPriority is design 001's: the first cluster by priority whose
	// last probe answered and whose queue depth is at most max_queue_depth.
	// The depth compared is the larger of what the cluster reported queued
	// and Falcon's own queue for the shape, so a burst between two probes
	// does not pile onto one cluster past its bound.
	PolicyPriority Policy = "priority"
)

// Policies are the names a registry's selection key may take, default first.
var Policies = []Policy{PolicySpread, PolicyPriority}

// ParsePolicy returns the policy a registry names; "" is PolicySpread.
func ParsePolicy(s string) (Policy, error) {
	if s == "" {
		return PolicySpread, nil
	}
	for _, p := range Policies {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("selection %q: allowed values are spread (the default) and priority", s)
}

// Selection is the decision record of placing one job (design 001's
// ClusterSelection): every cluster considered with the facts the policy
// read, why each one was passed over or how it ranked, the cluster chosen
// and why, and when. It is built from Select's inputs alone, so the same
// inputs give the same record.
type Selection struct {
	JobID           string
	AcceleratorType string
	Topology        string
	Policy          Policy
	// Candidates are every cluster given, those that could take the job
	// first in the policy's order (Rank 1, 2, ...), then the rejected ones
	// by name.
	Candidates []Candidate
	Selected   string // empty when no cluster could take the job
	Reason     string // "selected edge-a: reachable, queue_depth=2 <= max=5, priority 1"
	DecidedAt  time.Time
}

// Key is the queue the selection chose; the zero Key when none.
func (s Selection) Key() Key {
	if s.Selected == "" {
		return Key{}
	}
	return Key{Cluster: s.Selected, Topology: s.Topology}
}

// Candidate is one cluster's facts in a Selection.
type Candidate struct {
	Cluster       string
	Active        bool
	Offers        bool // offers the job's accelerator type
	Priority      int  // the registry's priority for the type (1 first)
	Probe         *Probe
	QueueDepth    int // Falcon's jobs waiting or acquiring in the cluster's queue for the shape
	MaxQueueDepth int // 0: unbounded
	IdlePools     int // idle node pools of the job's shape
	// Rank is the cluster's place among those that could take the job
	// (1 was chosen); 0 when it was rejected.
	Rank int
	// Rejected says why the cluster could not take the job; empty when it
	// could.
	Rejected string
}

// NoAvailableClusterError is design 001's error for a job no cluster can
// take: its text names every candidate's probe result, so the job's
// message says what was tried.
type NoAvailableClusterError struct {
	Selection Selection
}

func (e *NoAvailableClusterError) Error() string {
	s := e.Selection
	var offering []string
	for _, c := range s.Candidates {
		if c.Offers {
			offering = append(offering, fmt.Sprintf("%s: %s; %s", c.Cluster, c.Rejected, c.Probe))
		}
	}
	if len(offering) == 0 {
		// 001's text, then what each registered cluster is, so the job's
		// message says what was looked at.
		var seen []string
		for _, c := range s.Candidates {
			seen = append(seen, fmt.Sprintf("%s: %s; %s", c.Cluster, c.Rejected, c.Probe))
		}
		if len(seen) == 0 {
			return fmt.Sprintf("no cluster supports %s: no cluster is registered", s.AcceleratorType)
		}
		return fmt.Sprintf("no cluster supports %s: %s", s.AcceleratorType, strings.Join(seen, "; "))
	}
	return fmt.Sprintf("no available cluster for %s %s: %s", s.AcceleratorType, s.Topology, strings.Join(offering, "; "))
}

func (e *NoAvailableClusterError) Unwrap() error { return ErrUnplaceable }

// Select chooses the queue for a job that is not queued yet, without adding
// it, by design 000's policy (PolicySpread). A pinned job may go only to its
// cluster. Otherwise, among active clusters that offer the job's accelerator
// type and whose queue for its topology is below MaxQueueDepth, it prefers,
// in order:
//
//  1. a cluster with an idle node pool of the job's type and topology,
//  2. the shortest queue (waiting plus acquiring) for the topology,
//  3. the higher priority for the type,
//  4. the smaller name, so equal clusters are chosen deterministically.
//
// If no cluster fits, the error is an *UnplaceableError.
func (s *Scheduler) Select(job Job, clusters []Cluster) (Key, error) {
	sel, err := s.SelectExplained(job, clusters, PolicySpread)
	return sel.Key(), err
}

// SelectExplained is Select under policy p, returning the decision record
// with the choice. If no cluster fits, the record names none and the error
// is an *UnplaceableError; under PolicyPriority its message is the
// NoAvailableClusterError text, every probe result included.
func (s *Scheduler) SelectExplained(job Job, clusters []Cluster, p Policy) (Selection, error) {
	if err := validateJob(job); err != nil {
		return Selection{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return Explain(job, clusters, s.depthLocked, p, s.now())
}

func (s *Scheduler) depthLocked(k Key) int {
	if q := s.queues[k]; q != nil {
		return q.depth()
	}
	return 0
}

// Explain is the pure core of SelectExplained: depth says how many jobs
// wait or acquire in a queue, now stamps the record. A caller outside the
// resource manager (falcon exp explain) uses it to say which clusters could
// take a job now, from the depths the clusters last reported.
func Explain(job Job, clusters []Cluster, depth func(Key) int, p Policy, now time.Time) (Selection, error) {
	if p == "" {
		p = PolicySpread
	}
	typ, topo := job.AcceleratorType, job.Topology
	shape := job.Shape
	if shape == "" {
		shape = topo
	}
	sel := Selection{JobID: job.ID, AcceleratorType: typ, Topology: topo, Policy: p, DecidedAt: now}
	cands := make([]Candidate, len(clusters))
	for i := range clusters {
		c := &clusters[i]
		prio, offers := c.Accelerators[typ]
		shown, ok := c.RegistryPriority[typ]
		if !ok {
			shown = prio
		}
		cands[i] = Candidate{
			Cluster: c.Name, Active: c.Active, Offers: offers, Priority: shown, Probe: c.Probe,
			QueueDepth: depth(Key{c.Name, topo}), MaxQueueDepth: c.MaxQueueDepth, IdlePools: c.IdlePools[Pool{typ, shape}],
		}
		cd := &cands[i]
		switch {
		case job.PinnedCluster != "" && c.Name != job.PinnedCluster:
			cd.Rejected = "the job is pinned to " + job.PinnedCluster
		case !c.Active:
			cd.Rejected = "not active"
		case !offers:
			cd.Rejected = "does not offer " + typ
		case p == PolicyPriority && c.Probe == nil:
			cd.Rejected = "not probed yet"
		case p == PolicyPriority && !c.Probe.Reachable:
			cd.Rejected = "unreachable"
		case p == PolicyPriority && c.MaxQueueDepth > 0 && priorityDepth(cd) > c.MaxQueueDepth:
			cd.Rejected = fmt.Sprintf("queue_depth=%d > max=%d", priorityDepth(cd), c.MaxQueueDepth)
		case p != PolicyPriority && c.MaxQueueDepth > 0 && cd.QueueDepth >= c.MaxQueueDepth:
			cd.Rejected = fmt.Sprintf("queue for %s is full: %d waiting or acquiring, max %d", topo, cd.QueueDepth, c.MaxQueueDepth)
		}
	}
	// Order: eligible ones best first, then rejected ones by name.
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := &cands[a], &cands[b]
		if (ca.Rejected == "") != (cb.Rejected == "") {
			if ca.Rejected == "" {
				return -1
			}
			return 1
		}
		if ca.Rejected != "" {
			return strings.Compare(ca.Cluster, cb.Cluster)
		}
		pa, pb := clusters[a].Accelerators[typ], clusters[b].Accelerators[typ]
		if p == PolicyPriority {
			return cmp.Or(cmp.Compare(pb, pa), strings.Compare(ca.Cluster, cb.Cluster))
		}
		if (ca.IdlePools > 0) != (cb.IdlePools > 0) {
			if ca.IdlePools > 0 {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(ca.QueueDepth, cb.QueueDepth), cmp.Compare(pb, pa), strings.Compare(ca.Cluster, cb.Cluster))
	})
	sel.Candidates = make([]Candidate, 0, len(cands))
	for _, i := range order {
		cd := cands[i]
		if cd.Rejected == "" {
			cd.Rank = len(sel.Candidates) + 1
		}
		sel.Candidates = append(sel.Candidates, cd)
	}
	if len(sel.Candidates) > 0 && sel.Candidates[0].Rank == 1 {
		best := &sel.Candidates[0]
		sel.Selected = best.Cluster
		sel.Reason = "selected " + best.Cluster + ": " + chosenWhy(job, best, p, topo, shape)
		return sel, nil
	}
	return sel, unplaceable(job, sel, clusters, p)
}

// priorityDepth is the queue depth PolicyPriority compares with the bound.
func priorityDepth(c *Candidate) int {
	if c.Probe != nil && c.Probe.QueueDepth > c.QueueDepth {
		return c.Probe.QueueDepth
	}
	return c.QueueDepth
}

func maxText(n int) string {
	if n <= 0 {
		return "unbounded"
	}
	return fmt.Sprint(n)
}

func chosenWhy(job Job, c *Candidate, p Policy, topo, shape string) string {
	switch {
	case job.PinnedCluster != "":
		return fmt.Sprintf("the job is pinned to it (the experiment's cluster_name), queue_depth=%d, max=%s", c.QueueDepth, maxText(c.MaxQueueDepth))
	case p == PolicyPriority:
		return fmt.Sprintf("reachable, queue_depth=%d <= max=%s, priority %d", priorityDepth(c), maxText(c.MaxQueueDepth), c.Priority)
	case c.IdlePools > 0:
		return fmt.Sprintf("idle %s pool (%d idle), queue_depth=%d", shape, c.IdlePools, c.QueueDepth)
	}
	return fmt.Sprintf("shortest queue for %s, queue_depth=%d < max=%s, priority %d", topo, c.QueueDepth, maxText(c.MaxQueueDepth), c.Priority)
}

// unplaceable is the error of a selection that chose nothing, with the
// messages jobs have always shown under PolicySpread.
func unplaceable(job Job, sel Selection, clusters []Cluster, p Policy) error {
	typ, topo, pin := job.AcceleratorType, job.Topology, job.PinnedCluster
	e := func(r Reason, format string, args ...any) error {
		return &UnplaceableError{JobID: job.ID, Reason: r, Message: fmt.Sprintf(format, args...)}
	}
	if pin != "" {
		i := slices.IndexFunc(clusters, func(c Cluster) bool { return c.Name == pin })
		if i < 0 {
			return e(PinnedClusterUnavailable, "pinned cluster %s is not a candidate for %s", pin, typ)
		}
		c := &clusters[i]
		if !c.Active {
			return e(PinnedClusterUnavailable, "pinned cluster %s is not active", pin)
		}
		if _, ok := c.Accelerators[typ]; !ok {
			return e(PinnedClusterUnavailable, "pinned cluster %s does not offer %s", pin, typ)
		}
		if p == PolicyPriority {
			return e(NoAvailableCluster, "%s", (&NoAvailableClusterError{Selection: sel}).Error())
		}
		return e(QueuesFull, "pinned cluster %s is at max queue depth (%d) for %s %s", pin, c.MaxQueueDepth, typ, topo)
	}
	offering := 0
	for _, c := range sel.Candidates {
		if c.Active && c.Offers {
			offering++
		}
	}
	switch {
	case offering == 0:
		return e(NoActiveCluster, "no active cluster offers %s", typ)
	case p == PolicyPriority:
		return e(NoAvailableCluster, "%s", (&NoAvailableClusterError{Selection: sel}).Error())
	}
	return e(QueuesFull, "all clusters offering %s are at max queue depth for %s", typ, topo)
}

// Selection returns the decision record EnqueueExplained kept for a queued
// job, for the caller to store when the job is picked. A job added without
// one (Add, MarkAcquiring: rebuilt after a restart) has none.
func (s *Scheduler) Selection(jobID string) (Selection, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.jobs[jobID]; ok && e.sel != nil {
		return *e.sel, true
	}
	return Selection{}, false
}
