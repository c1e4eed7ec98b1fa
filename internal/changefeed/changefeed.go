package changefeed

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
)

// Change is one entity written: its kind ("job", "experiment", "artifact",
// "cluster"), its id, and the experiment it belongs to, numbered by Seq.
type Change struct {
	Kind, ID, ExpID string
	Seq             int64
	// Derived: the change only follows from others on the feed (the
	// expController's writes mirroring an experiment's jobs).
	Derived bool
	// Writer is the name the writer gave itself on the call
	// (falconv1.WriterKey); empty if it gave none.
	Writer string
	// Settled: a job's change whose write left its experiment in line
	// with its jobs and nothing for the expController, or an experiment's
	// creation that left it nothing (see falconv1.Change.settled).
	Settled bool
	// Mirror: a job's change within Pending, which leaves the
	// expController at most a mirror to write (falconv1.Change.mirror).
	Mirror bool
	// Ended: an experiment's change whose write left it in a terminal
	// status, after which its jobs write no more results.
	Ended bool
}

// DefaultRetain is how many changes a Feed keeps for watchers that resume.
// At the resource manager's busiest (a status write per job per phase) it
// covers minutes of traffic, far longer than a controller's reconnect.
const DefaultRetain = 1 << 16

// Feed is an in-process broadcast of changes. The zero value is not usable; call New.
type Feed struct {
	epoch  string
	retain int

	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	ring []Change // the last retain changes, oldest first once full
	head int      // index of the oldest when len(ring) == retain
	seq  int64
}

// Option configures a Feed.
type Option func(*Feed)

// WithRetain keeps n changes for resuming watchers (default DefaultRetain).
func WithRetain(n int) Option { return func(f *Feed) { f.retain = max(n, 1) } }

// New returns an empty Feed with a fresh random epoch.
func New(opts ...Option) *Feed {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	f := &Feed{epoch: hex.EncodeToString(b), retain: DefaultRetain, subs: map[chan struct{}]struct{}{}}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Epoch names this feed: seqs of different feeds are unrelated.
func (f *Feed) Epoch() string { return f.epoch }

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

// Publish records the changes and wakes every subscriber without blocking.
// A call with no changes only wakes.
func (f *Feed) Publish(changes ...Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range changes {
		f.seq++
		c.Seq = f.seq
		if len(f.ring) < f.retain {
			f.ring = append(f.ring, c)
		} else {
			f.ring[f.head] = c
			f.head = (f.head + 1) % f.retain
		}
	}
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending; coalesce
		}
	}
}

// Latest is the seq of the newest change (0 before the first).
func (f *Feed) Latest() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// Since returns the changes numbered after seq, oldest first, and false
// when some of them are no longer held: the caller must then read
// everything again.
func (f *Feed) Since(seq int64) ([]Change, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq >= f.seq {
		return nil, seq == f.seq
	}
	oldest := f.seq - int64(len(f.ring)) + 1
	if seq+1 < oldest {
		return nil, false
	}
	n := int(f.seq - seq)
	out := make([]Change, 0, n)
	start := len(f.ring) - n
	for i := start; i < len(f.ring); i++ {
		out = append(out, f.ring[(f.head+i)%len(f.ring)])
	}
	return out, true
}
