package queue

import (
	"cmp"
	"slices"
)

// rank is a waiting job's place in its actor's FIFO: creation time, then ID.
// The time is in Unix nanoseconds. Comparing integers is cheaper than
// time.Time.Compare and, unlike it, ignores monotonic clock readings, which
// would order a job created in this process differently from the same job
// read back from the store.
type rank struct {
	created int64
	id      string
}

func (r rank) less(o rank) bool {
	if r.created != o.created {
		return r.created < o.created
	}
	return r.id < o.id
}

func compareRanks(a, b rank) int {
	return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.id, b.id))
}

// slot holds a job in a fifo; e is nil once the job left (a tombstone).
// It repeats the job's name so that computing positions reads only the
// fifo's contiguous slots, never the entries scattered over the heap.
type slot struct {
	rank
	name string
	e    *entry
}

// fifo is one actor's waiting jobs in one queue, sorted by rank, as a slice
// consumed from the front. Jobs of one actor almost always arrive in
// creation order, so an add is an append, a pick pops the front, and the
// sorted slice is walked as is to compute positions. An abort binary-searches
// its slot and leaves a tombstone rather than shifting the slice; tombstones
// are dropped when they reach the front or outnumber the live jobs, so every
// operation is O(log k) amortized except an add that is earlier than some
// of the actor's other jobs (after a restart, or clock skew between API
// servers), which shifts the slice.
type fifo struct {
	actor string
	slots []slot
	head  int  // slots[head] is the earliest live job while live > 0
	live  int  // live jobs in slots[head:]
	first rank // slots[head].rank, kept here so heap comparisons stay in cache
	index int  // position in queue.heads
}

// less orders actors by their earliest job, which is what a pick compares.
func (f *fifo) less(o *fifo) bool { return f.first.less(o.first) }
func (f *fifo) setIndex(i int)    { f.index = i }

// ref rebuilds a job's Ref from its slot; the actor is the fifo's.
func (f *fifo) ref(s slot) Ref { return Ref{ID: s.id, Actor: f.actor, Name: s.name} }

// insert adds e and reports whether it became the actor's earliest job.
func (f *fifo) insert(e *entry) bool {
	s := slot{rank: e.rank, name: e.job.Name, e: e}
	n := len(f.slots)
	switch {
	case f.live == 0:
		f.slots, f.head = append(f.slots[:0], s), 0
	case f.slots[n-1].less(s.rank):
		f.slots = append(f.slots, s)
	case f.head > 0 && s.less(f.first):
		f.head--
		f.slots[f.head] = s
	default:
		i, found := slices.BinarySearchFunc(f.slots[f.head:], s.rank, func(x slot, r rank) int { return compareRanks(x.rank, r) })
		if i += f.head; found { // the tombstone of the same job, removed and re-added
			f.slots[i] = s
		} else {
			f.slots = slices.Insert(f.slots, i, s)
		}
	}
	f.live++
	if f.slots[f.head].e == e {
		f.first = e.rank
		return true
	}
	return false
}

// remove takes e out, wherever it is.
func (f *fifo) remove(e *entry) {
	i, _ := slices.BinarySearchFunc(f.slots[f.head:], e.rank, func(x slot, r rank) int { return compareRanks(x.rank, r) })
	i += f.head
	f.slots[i].e = nil
	f.live--
	if i == f.head {
		f.settle()
	} else if tombs := len(f.slots) - f.head - f.live; tombs > 32 && tombs > f.live {
		f.compact()
	}
}

// pop removes and returns the earliest job.
func (f *fifo) pop() *entry {
	e := f.slots[f.head].e
	f.slots[f.head].e = nil
	f.live--
	f.settle()
	return e
}

// settle moves head past consumed slots and tombstones, and gives the
// consumed prefix back once it is half the slice, so memory tracks the
// number of waiting jobs rather than every job ever queued.
func (f *fifo) settle() {
	for f.head < len(f.slots) && f.slots[f.head].e == nil {
		f.slots[f.head] = slot{}
		f.head++
	}
	switch {
	case f.live == 0:
		clear(f.slots)
		f.slots, f.head = f.slots[:0], 0
		return
	case f.head >= 32 && 2*f.head >= len(f.slots):
		n := copy(f.slots, f.slots[f.head:])
		clear(f.slots[n:])
		f.slots, f.head = f.slots[:n], 0
	}
	f.first = f.slots[f.head].rank
}

// compact drops all tombstones.
func (f *fifo) compact() {
	live := f.slots[:0]
	for _, s := range f.slots[f.head:] {
		if s.e != nil {
			live = append(live, s)
		}
	}
	clear(f.slots[len(live):])
	f.slots, f.head = live, 0
	f.first = f.slots[0].rank
}

// queue is one (cluster, topology) queue. Picking is O(log A) for A actors:
// the winner is the best actor's earliest job or, when that actor was served
// last, the better of the heap root's two children, which are the second
// best.
type queue struct {
	key       Key
	actors    map[string]*fifo
	heads     minHeap[*fifo] // actors with waiting jobs, by earliest job
	waiting   int
	acquiring *entry
	// onDeck was picked ahead while the slot is held (Reserve): the next
	// Pick hands it the slot before anyone waiting.
	onDeck     *entry
	lastServed string

	// order caches the simulated pick order (see Waiting). A pick removes
	// exactly order[0] and leaves the rest valid, because the simulation
	// after step one starts from the state the pick leaves behind; adds,
	// removals and SetLastServed can reshuffle everything and clear it.
	order   []Ref
	orderOK bool
	// spare is the backing array of the last order built, which the next
	// simulation refills: an arrival invalidates a long queue's order at
	// every handover, and a fresh array each time was most of what a
	// cycle allocated at 10^5 waiting jobs (BenchmarkPlan100kWaiting).
	// No one outside the queue holds it: Waiting copies what it returns.
	spare []Ref
}

func (q *queue) invalidate() { q.order, q.orderOK = nil, false }

func (q *queue) push(e *entry) {
	f := q.actors[e.job.Actor]
	if f == nil {
		f = &fifo{actor: e.job.Actor}
		q.actors[f.actor] = f
		f.insert(e)
		q.heads.push(f)
	} else if f.insert(e) { // new earliest job: the actor moves up
		q.heads.up(f.index)
	}
	e.actor = f
	q.waiting++
	q.invalidate()
}

// unlink takes a waiting job out of its actor's FIFO. It leaves the cached
// order alone; the caller decides whether it is still valid.
func (q *queue) unlink(e *entry) {
	f := e.actor
	if f.slots[f.head].e == e {
		f.pop()
	} else {
		f.remove(e)
	}
	e.actor = nil
	if f.live == 0 {
		q.heads.remove(f.index)
		delete(q.actors, f.actor)
	} else {
		q.heads.down(f.index) // its earliest job can only have become later
	}
	q.waiting--
}

// next returns the actor whose earliest job the pick rule chooses.
func (q *queue) next() *fifo {
	h := q.heads
	if len(h) == 0 {
		return nil
	}
	if h[0].actor != q.lastServed || len(h) == 1 {
		return h[0]
	}
	if len(h) > 2 && h[2].less(h[1]) {
		return h[2]
	}
	return h[1]
}

func (q *queue) depth() int {
	n := q.waiting
	if q.acquiring != nil {
		n++
	}
	if q.onDeck != nil {
		n++
	}
	return n
}

// takeFront takes the job the pick rule chooses out of the waiting, making
// its actor the last served; nil if nobody waits.
func (q *queue) takeFront() *entry {
	a := q.next()
	if a == nil {
		return nil
	}
	e := a.slots[a.head].e
	q.unlink(e)
	q.lastServed = e.job.Actor
	if q.orderOK && len(q.order) > 0 && q.order[0].ID == e.job.ID {
		q.order[0] = Ref{}
		q.order = q.order[1:]
	} else {
		q.invalidate()
	}
	return e
}
