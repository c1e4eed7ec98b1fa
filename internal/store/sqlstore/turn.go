package sqlstore

import (
	"context"
	"sync"
)

// lane is the class of a write transaction waiting for SQLite's one
// writer.
type lane int

const (
	// laneJobs: job status writes, the resource manager's cycle batches
	// and the ends it records between cycles. Each is a step of a job
	// that someone waits on (a queue's next job, a run's end becoming its
	// experiment's end), and each is short.
	laneJobs lane = iota
	// laneOther: everything else, experiment creates and the
	// expController's batches among them.
	laneOther
	lanes
)

// String names the lane on the store's metrics.
func (l lane) String() string {
	if l == laneJobs {
		return "jobs"
	}
	return "other"
}

// maxJobStreak bounds how many job writes in a row take the writer while
// other writes wait, so that a stream of job writes cannot starve a
// create.
const maxJobStreak = 8

// turnstile hands SQLite's one writer connection to one transaction at a
// time: first to the job lane's, then to the others, each lane first come,
// first served. database/sql alone hands a freed connection to a random
// waiter, so a write could be passed over again and again while others
// queued behind it. With one lane a job write also waited for every write
// queued before it, creates included; now it waits for the write in hand
// (BenchmarkSQLiteJobWritesUnderLoad: p50 0.07 ms against 0.48 ms among
// eight busy writers).
type turnstile struct {
	mu   sync.Mutex
	busy bool
	// queued holds each lane's waiters in arrival order; a waiter's
	// channel is closed when the turn is handed to it.
	queued [lanes][]chan struct{}
	// streak counts the job writes granted in a row while another write
	// waited.
	streak int
	// oneLane puts every write in laneOther: plain first come, first
	// served, for the benchmark that compares the two.
	oneLane bool
}

func newTurnstile() *turnstile { return &turnstile{} }

// acquire waits for the writer's turn in lane l. It fails only with ctx's
// error, holding nothing then.
func (t *turnstile) acquire(ctx context.Context, l lane) error {
	t.mu.Lock()
	if t.oneLane {
		l = laneOther
	}
	if !t.busy {
		t.busy = true
		t.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	t.queued[l] = append(t.queued[l], ch)
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, c := range t.queued[l] {
		if c == ch {
			t.queued[l] = append(t.queued[l][:i], t.queued[l][i+1:]...)
			return ctx.Err()
		}
	}
	// Handed the turn as ctx ended: pass it on.
	t.handOver()
	return ctx.Err()
}

// release ends the holder's turn.
func (t *turnstile) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handOver()
}

// handOver gives the turn to the next waiter, or frees the writer. t.mu
// is held.
func (t *turnstile) handOver() {
	next := laneJobs
	switch {
	case len(t.queued[laneJobs]) == 0:
		next = laneOther
	case len(t.queued[laneOther]) > 0 && t.streak >= maxJobStreak:
		next = laneOther
	}
	q := t.queued[next]
	if len(q) == 0 {
		t.busy, t.streak = false, 0
		return
	}
	if next == laneJobs && len(t.queued[laneOther]) > 0 {
		t.streak++
	} else {
		t.streak = 0
	}
	close(q[0])
	q[0] = nil
	t.queued[next] = q[1:]
}

// waiting is how many transactions wait for their turn.
func (t *turnstile) waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queued[laneJobs]) + len(t.queued[laneOther])
}
