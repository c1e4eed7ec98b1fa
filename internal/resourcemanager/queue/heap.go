package queue

// heapElem is what minHeap needs from its elements: an order, and a way to
// remember where each one sits so that an arbitrary element (an aborted job,
// an actor whose earliest job changed) is fixed or removed in O(log n)
// instead of being searched for. container/heap would do the same through an
// interface and boxed values on every push; this is the hot path of Pick.
type heapElem[T any] interface {
	less(T) bool
	setIndex(int)
}

// minHeap is a binary min-heap whose elements track their own index.
type minHeap[T heapElem[T]] []T

func (h *minHeap[T]) push(x T) {
	*h = append(*h, x)
	i := len(*h) - 1
	x.setIndex(i)
	h.up(i)
}

// remove takes out the element at index i and returns it.
func (h *minHeap[T]) remove(i int) T {
	old := *h
	last := len(old) - 1
	x := old[i]
	if i != last {
		old.swap(i, last)
	}
	var zero T
	old[last] = zero // let the garbage collector have it
	*h = old[:last]
	if i != last {
		h.fix(i)
	}
	x.setIndex(-1)
	return x
}

// fix restores the order after the element at index i changed.
func (h minHeap[T]) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h minHeap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down reports whether the element moved.
func (h minHeap[T]) down(i0 int) bool {
	i, n := i0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h[r].less(h[l]) {
			j = r
		}
		if !h[j].less(h[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

func (h minHeap[T]) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].setIndex(i)
	h[j].setIndex(j)
}
