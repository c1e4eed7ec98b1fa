package queue

import (
	"slices"
	"strconv"
	"strings"
)

// Position is where a waiting job stands in its queue.
type Position struct {
	Ref
	// Pos is 1-based: Pos-1 jobs will be picked before this one if nothing
	// changes. It follows the pick rule, not plain FIFO.
	Pos int
	// Ahead lists the first jobs of the queue, at most the scheduler's ahead
	// limit of the Pos-1 jobs in front of this one. Positions returned by one
	// Waiting call share this backing array; treat it as read-only.
	Ahead []Ref
	// Acquiring is the job holding the queue's slot, nil if it is free;
	// shared like Ahead.
	Acquiring *Ref
}

// Message is the job's Waiting message, e.g.
//
//	queue position #3, 2 ahead: user-a: profiling-v7x, user-b: benchmark-v7x
//
// For the job at the front it names what it waits for instead.
func (p Position) Message() string {
	var b strings.Builder
	b.WriteString("queue position #")
	b.WriteString(strconv.Itoa(p.Pos))
	ahead := p.Pos - 1
	if ahead == 0 {
		b.WriteString(", next in line")
		if p.Acquiring != nil {
			b.WriteString(", waiting for ")
			b.WriteString(p.Acquiring.label())
			b.WriteString(" to finish acquiring resources")
		}
		return b.String()
	}
	b.WriteString(", ")
	b.WriteString(strconv.Itoa(ahead))
	b.WriteString(" ahead")
	for i, r := range p.Ahead {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(r.label())
	}
	if more := ahead - len(p.Ahead); more > 0 && len(p.Ahead) > 0 {
		b.WriteString(" and ")
		b.WriteString(strconv.Itoa(more))
		b.WriteString(" more")
	}
	return b.String()
}

// Waiting returns key's waiting jobs in the order Pick would hand them out
// if no job arrived or left: the round-robin is played out, starting from
// the queue's last-served actor. It costs O(n log n) for n waiting jobs the
// first time after an Add, Remove or SetLastServed, and O(n) (building the
// result) when only picks happened since, because a pick consumes exactly
// the front of the cached order.
func (s *Scheduler) Waiting(key Key) []Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[key]
	if q == nil || q.waiting == 0 {
		return nil
	}
	order := q.simulate()
	head := make([]Ref, min(len(order), s.aheadLimit))
	for i := range head {
		head[i] = order[i].ref()
	}
	var holder *Ref
	if q.acquiring != nil {
		r := q.acquiring.ref()
		holder = &r
	}
	out := make([]Position, len(order))
	for i, e := range order {
		n := min(i, len(head))
		out[i] = Position{Ref: e.ref(), Pos: i + 1, Ahead: head[:n:n], Acquiring: holder}
	}
	return out
}

// cursor walks one actor's jobs, sorted, during a simulation.
type cursor struct {
	actor string
	jobs  []*entry
	next  int
	index int
}

func (c *cursor) less(o *cursor) bool { return c.jobs[c.next].less(o.jobs[o.next]) }
func (c *cursor) setIndex(i int)      { c.index = i }

// simulate returns the queue's pick order, from the cache if it is valid.
// It replays queue.next step by step on sorted copies of each actor's jobs,
// so it can never disagree with Pick.
func (q *queue) simulate() []*entry {
	if q.orderOK {
		return q.order
	}
	cursors := make([]cursor, 0, len(q.heads))
	h := make(minHeap[*cursor], 0, len(q.heads))
	for _, a := range q.heads {
		jobs := slices.Clone(a.jobs)
		slices.SortFunc(jobs, func(x, y *entry) int {
			if x.less(y) {
				return -1
			}
			return 1 // IDs are unique, so no two entries are equal
		})
		cursors = append(cursors, cursor{actor: a.name, jobs: jobs})
	}
	for i := range cursors {
		h.push(&cursors[i])
	}
	order := make([]*entry, 0, q.waiting)
	last := q.lastServed
	for len(h) > 1 {
		i := 0
		if h[0].actor == last {
			i = 1
			if len(h) > 2 && h[2].less(h[1]) {
				i = 2
			}
		}
		c := h[i]
		order = append(order, c.jobs[c.next])
		c.next++
		last = c.actor
		if c.next == len(c.jobs) {
			h.remove(i)
		} else {
			h.down(i) // its head only got later
		}
	}
	if len(h) == 1 { // one actor left: plain FIFO
		c := h[0]
		order = append(order, c.jobs[c.next:]...)
	}
	q.order, q.orderOK = order, true
	return order
}
