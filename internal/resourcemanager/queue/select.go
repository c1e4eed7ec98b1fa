package queue

import (
	"cmp"
	"fmt"
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
}

// Select chooses the queue for a job that is not queued yet, without adding
// it. A pinned job may go only to its cluster. Otherwise, among active
// clusters that offer the job's accelerator type and whose queue for its
// topology is below MaxQueueDepth, it prefers, in order:
//
//  1. a cluster with an idle node pool of the job's type and topology,
//  2. the shortest queue (waiting plus acquiring) for the topology,
//  3. the higher priority for the type,
//  4. the smaller name, so equal clusters are chosen deterministically.
//
// If no cluster fits, the error is an *UnplaceableError.
func (s *Scheduler) Select(job Job, clusters []Cluster) (Key, error) {
	if err := validateJob(job); err != nil {
		return Key{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.selectLocked(job, clusters)
}

type candidate struct {
	c     *Cluster
	idle  bool
	depth int
	prio  int
}

// better orders candidates by Select's preference.
func (a candidate) better(b candidate) bool {
	if a.idle != b.idle {
		return a.idle
	}
	if c := cmp.Or(cmp.Compare(a.depth, b.depth), cmp.Compare(b.prio, a.prio)); c != 0 {
		return c < 0
	}
	return a.c.Name < b.c.Name
}

func (s *Scheduler) selectLocked(job Job, clusters []Cluster) (Key, error) {
	typ, topo := job.AcceleratorType, job.Topology
	unplaceable := func(r Reason, format string, args ...any) (Key, error) {
		return Key{}, &UnplaceableError{JobID: job.ID, Reason: r, Message: fmt.Sprintf(format, args...)}
	}
	depth := func(c *Cluster) int {
		if q := s.queues[Key{c.Name, topo}]; q != nil {
			return q.depth()
		}
		return 0
	}
	full := func(c *Cluster, d int) bool { return c.MaxQueueDepth > 0 && d >= c.MaxQueueDepth }

	if pin := job.PinnedCluster; pin != "" {
		for i := range clusters {
			c := &clusters[i]
			if c.Name != pin {
				continue
			}
			if !c.Active {
				return unplaceable(PinnedClusterUnavailable, "pinned cluster %s is not active", pin)
			}
			if _, ok := c.Accelerators[typ]; !ok {
				return unplaceable(PinnedClusterUnavailable, "pinned cluster %s does not offer %s", pin, typ)
			}
			if d := depth(c); full(c, d) {
				return unplaceable(QueuesFull, "pinned cluster %s is at max queue depth (%d) for %s %s", pin, c.MaxQueueDepth, typ, topo)
			}
			return Key{Cluster: pin, Topology: topo}, nil
		}
		return unplaceable(PinnedClusterUnavailable, "pinned cluster %s is not a candidate for %s", pin, typ)
	}

	var best candidate
	offering := 0
	for i := range clusters {
		c := &clusters[i]
		prio, ok := c.Accelerators[typ]
		if !c.Active || !ok {
			continue
		}
		offering++
		d := depth(c)
		if full(c, d) {
			continue
		}
		cand := candidate{c: c, idle: c.IdlePools[Pool{typ, topo}] > 0, depth: d, prio: prio}
		if best.c == nil || cand.better(best) {
			best = cand
		}
	}
	switch {
	case offering == 0:
		return unplaceable(NoActiveCluster, "no active cluster offers %s", typ)
	case best.c == nil:
		return unplaceable(QueuesFull, "all clusters offering %s are at max queue depth for %s", typ, topo)
	}
	return Key{Cluster: best.c.Name, Topology: topo}, nil
}
