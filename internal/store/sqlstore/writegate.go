package sqlstore

import (
	"context"
	"sync"
)

// writeGate orders the transactions waiting for SQLite's one write
// connection. A status write — the controllers' and the user's abort,
// whose latency is how fast jobs move and stop — goes ahead of every other
// waiting write (a create, a file index, an event), so that a burst of a
// thousand creates cannot hold a job's end or the next job's dispatch
// behind it; within each class, first come, first served. Without it the
// writers would queue in database/sql's pool, which serves them in no
// particular order. MySQL needs none: its writers wait on rows, not on one
// connection, and the Store leaves the gate nil there.
//
// Creates are not starved for long: status writes come in batches of up
// to a thousand jobs, a few a second from each controller, and each holds
// the connection for milliseconds.
type writeGate struct {
	mu     sync.Mutex
	busy   bool
	urgent []chan struct{} // waiting status writes, oldest first
	other  []chan struct{} // every other waiting write, oldest first
}

// enter waits for the gate, ahead of every non-urgent waiter if urgent,
// and returns nil holding it; or, if ctx ends first, ctx's error holding
// nothing. A nil gate admits at once.
func (g *writeGate) enter(ctx context.Context, urgent bool) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	q := &g.other
	if urgent {
		q = &g.urgent
	}
	*q = append(*q, ch)
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		for i, w := range *q {
			if w == ch {
				*q = append((*q)[:i], (*q)[i+1:]...)
				g.mu.Unlock()
				return ctx.Err()
			}
		}
		// Handed the gate as ctx ended: pass it on.
		g.mu.Unlock()
		g.leave()
		return ctx.Err()
	}
}

// leave hands the gate to the oldest urgent waiter, else the oldest other
// one, else frees it.
func (g *writeGate) leave() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, q := range []*[]chan struct{}{&g.urgent, &g.other} {
		if len(*q) > 0 {
			ch := (*q)[0]
			*q = (*q)[1:]
			close(ch)
			return
		}
	}
	g.busy = false
}
