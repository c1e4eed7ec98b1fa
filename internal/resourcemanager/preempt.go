package resourcemanager

import (
	"context"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
)

// view brings the cycle's view of the snapshot up to date: every live job
// (the snapshot's pointers, which a read replaces), who owns each pool, and
// the clusters jobs are placed on. The pools are listed once per cycle.
func (m *Manager) view(ctx context.Context, c *cycle, clusters []*falconv1.Cluster) {
	c.all = make([]*falconv1.Job, 0, len(m.snap.jobs))
	for _, j := range m.snap.jobs {
		c.all = append(c.all, j)
	}
	if c.pools == nil {
		m.loadPools(ctx, c, c.all)
	} else {
		m.loadOwners(c, c.all)
	}
	c.cands = m.candidates(clusters)
	for i := range c.cands {
		c.cands[i].IdlePools = c.idlePools(c.cands[i].Name)
	}
}

// preempt takes up, between two steps of a cycle, the jobs backends
// reported since it last ran (Touch): a slot holder whose pods now run
// gives its slot to the next job of its queue, which is picked and handed
// to its cluster at once (000 section 4's rule is unchanged: the slot is
// released when the holder's pods run); a running job that ended is
// recorded, so its end reaches its experiment without waiting for the
// cycle's other work. It is the cycle looking at those jobs first, in the
// Run goroutine on the cycle's own view, so nothing runs beside the cycle;
// the writes are the cycle's conditional ones, and a row changed since the
// snapshot was read (an abort) makes its write lose cleanly, as in any
// cycle.
//
// The reported jobs stay touched: the cycle's own steps look at them again
// for what else they need (positions, pools, deadlines).
func (m *Manager) preempt(ctx context.Context, c *cycle) {
	if !m.hasUrgent.Load() || ctx.Err() != nil {
		return
	}
	m.touchMu.Lock()
	ids := m.urgent
	m.urgent = map[string]bool{}
	m.hasUrgent.Store(false)
	m.touchMu.Unlock()
	sel := make(map[string]*falconv1.Job, len(ids))
	for id := range ids {
		if j := m.snap.jobs[id]; j != nil && !m.sub.hold(id) {
			sel[id] = j
		}
	}
	if len(sel) == 0 {
		return
	}
	c.preempted++
	cur := c.cur
	for _, j := range ordered(sel) {
		switch {
		case j.GetStatus() == string(lifecycle.Pending) && acquiring(j):
			c.look(j)
			m.acquire(ctx, c, j, false)
		case j.GetStatus() == string(lifecycle.Running):
			c.look(j)
			m.observeRunning(ctx, c, j)
		}
	}
	c.cur = ""
	// Jobs that ended above left their pools to the picks that follow.
	m.loadOwners(c, c.all)
	m.pickAll(ctx, c, m.snap.jobs)
	m.flush(ctx, c, nil, nil)
	c.cur = cur
}
