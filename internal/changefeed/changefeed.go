package changefeed

import "sync"

// Feed is an in-process broadcast of wake-ups. The zero value is not usable; call New.
type Feed struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// New returns an empty Feed.
func New() *Feed { return &Feed{subs: map[chan struct{}]struct{}{}} }

// Subscribe returns a channel that receives a value after each Publish (at
// most one pending), and a cancel func that must be called to unsubscribe.
func (f *Feed) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.subs, ch)
		f.mu.Unlock()
	}
}

// Publish wakes every subscriber without blocking.
func (f *Feed) Publish() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending; coalesce
		}
	}
}
