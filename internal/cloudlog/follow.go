package cloudlog

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"cloud.google.com/go/logging/apiv2/loggingpb"
)

// follow goes on from a listing with lines as Cloud Logging ingests them,
// until ctx is done or fn fails. One session:
//
//  1. Open a TailLogEntries stream first, so that every entry ingested from
//     then on reaches it, and receive from it in the background: Cloud
//     Logging drops what a slow reader does not take (NOT_CONSUMED).
//  2. Catch up: list again from the last line given, less the lateness
//     margin, for what was ingested between the listing and the tail, and
//     for late entries; skip what was given already (by insert_id).
//  3. Catch up once more after the lateness has passed, for entries
//     ingested before Cloud Logging had registered the session.
//  4. Give the tail's entries, skipping those a catch-up already gave.
//
// Cloud Logging ends tail sessions after a while; follow then opens a new
// one, from step 1, so the stream goes on without losing or repeating lines.
// A retryable failure reopens too, with backoff, up to maxRetries sessions
// in a row that gave nothing.
func (r *Retriever) follow(ctx context.Context, t Target, filter string, seen *seenSet, fn func(Line) error) error {
	failures := 0
	for {
		progressed, err := r.tailSession(ctx, t, filter, seen, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ce *callerError
		if errors.As(err, &ce) {
			return ce.err
		}
		var re *RetrievalError
		if err != nil && (!errors.As(err, &re) || !re.Retryable()) {
			return err
		}
		if progressed {
			failures = 0
		} else {
			failures++
		}
		if failures > r.maxRetries {
			if err == nil {
				err = &RetrievalError{Op: "tail", Project: t.Project, Rank: -1, Kind: KindUnavailable, Err: errors.New("tail sessions keep ending without giving any entry")}
			}
			return err
		}
		if failures > 0 {
			timer := time.NewTimer(time.Duration(100<<min(failures, 6)) * time.Millisecond)
			select {
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			case <-timer.C:
			}
		}
	}
}

// callerError marks an error of the caller's fn, which ends following
// whatever it is.
type callerError struct{ err error }

func (e *callerError) Error() string { return e.err.Error() }

// tailSession runs steps 1-4 of follow once, until the stream ends. It
// reports whether it got anywhere: a catch-up listing or a response.
func (r *Retriever) tailSession(ctx context.Context, t Target, filter string, seen *seenSet, fn func(Line) error) (bool, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer seen.unpin()
	stream, err := r.client.TailLogEntries(sctx)
	if err != nil {
		return false, retrievalError(ctx, "tail", t.Project, -1, err)
	}
	if err := stream.Send(&loggingpb.TailLogEntriesRequest{
		ResourceNames: []string{"projects/" + t.Project},
		Filter:        filter,
	}); err != nil {
		// The cause of a failed Send is what Recv returns.
		_, err = stream.Recv()
		return false, retrievalError(ctx, "tail", t.Project, -1, err)
	}
	q := &tailQueue{ready: make(chan struct{}, 1)}
	go q.receive(stream)

	give := func(e *loggingpb.LogEntry, pin bool) error {
		if seen.has(e.GetInsertId()) {
			return nil
		}
		l := toLine(t.Workload, e)
		seen.add(l.InsertID, l.Time, pin)
		if err := fn(l); err != nil {
			return &callerError{err}
		}
		return nil
	}
	catchUp := func() error {
		f := filter
		if from := seen.from(); !from.IsZero() {
			f += " AND timestamp>=" + quoteTime(from)
		}
		return r.list(sctx, t, "list", -1, f, false, r.pageSize, func(e *loggingpb.LogEntry) error {
			return give(e, true)
		})
	}
	if err := catchUp(); err != nil {
		return false, err
	}
	again := time.NewTimer(r.lateness)
	defer again.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-again.C:
			if err := catchUp(); err != nil {
				return true, err
			}
		case <-q.ready:
			entries, err, done := q.take()
			for _, e := range entries {
				if err := give(e, false); err != nil {
					return true, err
				}
			}
			if done {
				if errors.Is(err, errStreamEnded) {
					return true, nil
				}
				return true, retrievalError(ctx, "tail", t.Project, -1, err)
			}
		}
	}
}

var errStreamEnded = errors.New("tail session ended")

// tailQueue holds what the background receiver got and the main loop has
// not given yet: the entries of the few seconds a catch-up takes.
type tailQueue struct {
	mu      sync.Mutex
	entries []*loggingpb.LogEntry
	err     error
	done    bool
	ready   chan struct{}
}

func (q *tailQueue) receive(stream loggingpb.LoggingServiceV2_TailLogEntriesClient) {
	for {
		resp, err := stream.Recv()
		q.mu.Lock()
		if err != nil {
			q.done = true
			q.err = err
			if errors.Is(err, io.EOF) {
				q.err = errStreamEnded
			}
		} else {
			q.entries = append(q.entries, resp.GetEntries()...)
		}
		q.mu.Unlock()
		select {
		case q.ready <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

func (q *tailQueue) take() ([]*loggingpb.LogEntry, error, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.entries
	q.entries = nil
	return e, q.err, q.done
}

// seenSet remembers the insert IDs of the lines given that a catch-up
// listing could give again: those within margin of the newest line, and
// those the current session's catch-ups listed (its tail may deliver them
// too). Memory is bounded by the rate of lines times the margin, plus the
// size of one catch-up.
type seenSet struct {
	margin time.Duration
	max    time.Time
	recent map[string]time.Time
	pinned map[string]struct{}
	limit  int
}

func newSeenSet(margin time.Duration) *seenSet {
	return &seenSet{margin: margin, recent: map[string]time.Time{}, pinned: map[string]struct{}{}, limit: 1024}
}

func (s *seenSet) has(id string) bool {
	if _, ok := s.recent[id]; ok {
		return true
	}
	_, ok := s.pinned[id]
	return ok
}

func (s *seenSet) add(id string, t time.Time, pin bool) {
	if t.After(s.max) {
		s.max = t
	}
	s.recent[id] = t
	if pin {
		s.pinned[id] = struct{}{}
	}
	if len(s.recent) > s.limit {
		cut := s.from()
		for id, t := range s.recent {
			if t.Before(cut) {
				delete(s.recent, id)
			}
		}
		s.limit = max(1024, 2*len(s.recent))
	}
}

// unpin forgets the IDs only the ended session needed.
func (s *seenSet) unpin() { clear(s.pinned) }

// from is where a catch-up listing starts: zero (the filter's own start)
// before any line was given.
func (s *seenSet) from() time.Time {
	if s.max.IsZero() {
		return time.Time{}
	}
	return s.max.Add(-s.margin)
}
