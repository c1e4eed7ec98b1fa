package queue

import (
	"strconv"
	"strings"
)

// Position is where a waiting job stands in its queue.
type Position struct {
	Ref
	// Pos is 1-based: Pos-1 jobs will be picked before this one if nothing
	// changes. It follows the pick rule, not plain FIFO.
	Pos int
	// Ahead names the first of the Pos-1 jobs in front of this one, up to
	// the scheduler's ahead limit, front of the queue first: the jobs that
	// go next are the ones worth naming. Positions returned by one Waiting
	// call share this backing array; treat it as read-only.
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
	b.Grow(96 + 48*len(p.Ahead)) // one allocation for typical names
	var num [20]byte
	b.WriteString("queue position #")
	b.Write(strconv.AppendInt(num[:0], int64(p.Pos), 10))
	ahead := p.Pos - 1
	if ahead == 0 {
		b.WriteString(", next in line")
		if p.Acquiring != nil {
			b.WriteString(", waiting for ")
			writeLabel(&b, *p.Acquiring)
			b.WriteString(" to finish acquiring resources")
		}
		return b.String()
	}
	b.WriteString(", ")
	b.Write(strconv.AppendInt(num[:0], int64(ahead), 10))
	b.WriteString(" ahead")
	for i, r := range p.Ahead {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		writeLabel(&b, r)
	}
	if more := ahead - len(p.Ahead); more > 0 && len(p.Ahead) > 0 {
		b.WriteString(" and ")
		b.Write(strconv.AppendInt(num[:0], int64(more), 10))
		b.WriteString(" more")
	}
	return b.String()
}

// writeLabel writes how a job appears in other jobs' messages.
func writeLabel(b *strings.Builder, r Ref) {
	b.WriteString(r.Actor)
	b.WriteString(": ")
	if r.Name != "" {
		b.WriteString(r.Name)
	} else {
		b.WriteString(r.ID)
	}
}

// Waiting returns key's waiting jobs in the order Pick would hand them out
// if no job arrived or left: the round-robin is played out, starting from
// the queue's last-served actor. For n waiting jobs of A actors it costs
// O(n log A) the first time after an Add, Remove or SetLastServed, and O(n)
// (building the result) when only picks and releases happened since, because
// a pick consumes exactly the front of the cached order.
func (s *Scheduler) Waiting(key Key) []Position { return s.AppendWaiting(nil, key) }

// AppendWaiting appends what Waiting returns to dst and returns the
// extended slice, so a caller that asks every cycle can reuse one buffer:
// the resource manager asked for its busy queues' positions a few hundred
// times a second in BenchmarkKubeDispatch, and the fresh slices came to
// 61 MB in 18 s.
func (s *Scheduler) AppendWaiting(dst []Position, key Key) []Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[key]
	if q == nil || q.waiting == 0 {
		return dst
	}
	order := q.simulate()
	// A job on deck goes before every waiting one.
	var deck []Ref
	if q.onDeck != nil {
		deck = []Ref{q.onDeck.ref()}
	}
	n := min(len(deck)+len(order), s.aheadLimit)
	head := make([]Ref, 0, n) // not the cache itself: a Pick rewrites it
	head = append(head, deck[:min(len(deck), n)]...)
	head = append(head, order[:n-len(head)]...)
	var holder *Ref
	if q.acquiring != nil {
		r := q.acquiring.ref()
		holder = &r
	}
	for i, r := range order {
		k := i + len(deck)
		n := min(k, len(head))
		dst = append(dst, Position{Ref: r, Pos: k + 1, Ahead: head[:n:n], Acquiring: holder})
	}
	return dst
}

// cursor walks one actor's FIFO during a simulation.
type cursor struct {
	f     *fifo
	pos   int  // next live slot in f.slots
	first rank // f.slots[pos].rank
}

// cursors is a min-heap of cursors by first. It is written out rather than
// reusing minHeap because this loop runs once per waiting job, and plain
// code lets the compiler inline the comparisons that generic code reaches
// through a dictionary.
type cursors []cursor

func (h cursors) fix(i int) {
	for i > 0 { // up
		p := (i - 1) / 2
		if !h[i].first.less(h[p].first) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	for { // down
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		j := l
		if r := l + 1; r < len(h) && h[r].first.less(h[l].first) {
			j = r
		}
		if !h[j].first.less(h[i].first) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

func (h *cursors) remove(i int) {
	last := len(*h) - 1
	(*h)[i] = (*h)[last]
	*h = (*h)[:last]
	if i < last {
		h.fix(i)
	}
}

// simulate returns the queue's pick order, from the cache if it is valid.
// It replays queue.next step by step over the actors' FIFOs, which are
// already sorted, so it costs O(n log A) and can never disagree with Pick.
func (q *queue) simulate() []Ref {
	if q.orderOK {
		return q.order
	}
	// q.heads is a heap by the same key, so its copy needs no heapifying.
	h := make(cursors, len(q.heads))
	for i, f := range q.heads {
		h[i] = cursor{f: f, pos: f.head, first: f.first}
	}
	order := q.spare[:0]
	if cap(order) < q.waiting {
		order = make([]Ref, 0, q.waiting+q.waiting/4)
	}
	last := q.actors[q.lastServed] // nil if that actor has nothing waiting
	for len(h) > 1 {
		i := 0
		if h[0].f == last {
			i = 1
			if len(h) > 2 && h[2].first.less(h[1].first) {
				i = 2
			}
		}
		c := &h[i]
		f := c.f
		order = append(order, f.ref(f.slots[c.pos]))
		last = f
		c.pos++
		for c.pos < len(f.slots) && f.slots[c.pos].e == nil {
			c.pos++
		}
		if c.pos == len(f.slots) {
			h.remove(i)
		} else {
			c.first = f.slots[c.pos].rank
			h.fix(i) // its earliest job only got later
		}
	}
	if len(h) == 1 { // one actor left: plain FIFO
		f := h[0].f
		for _, sl := range f.slots[h[0].pos:] {
			if sl.e != nil {
				order = append(order, f.ref(sl))
			}
		}
	}
	clear(order[len(order):cap(order)]) // what an earlier order held past this one's end
	q.order, q.orderOK, q.spare = order, true, order
	return order
}
