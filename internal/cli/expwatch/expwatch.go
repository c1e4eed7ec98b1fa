package expwatch

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/client"
)

// FirstAnswerGrace is how long a watch retries a server that has not
// answered yet: long enough to ride out a restart, short enough that a
// wrong --server fails fast (exit 6).
const FirstAnswerGrace = 10 * time.Second

// Watch follows one experiment's events.
type Watch struct {
	Client *client.Client
	ID     string
	// AfterSeq resumes after this event (0: from the oldest kept).
	AfterSeq int64
	// HistoryOnly ends after the events kept, without waiting for more.
	HistoryOnly bool
	// Grace overrides FirstAnswerGrace when positive.
	Grace time.Duration
	// OnBreak, when set, is told of each broken stream before the next
	// attempt (for a warning on stderr).
	OnBreak func(err error)
	// Sleep waits between attempts; nil uses a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock the grace is measured with; nil is time.Now.
	Now func() time.Time
}

// Run calls fn with every event in seq order, heartbeats left out, until
// the experiment has ended (Run returns nil after fn saw the event marked
// terminal, or at once on a stream resumed after the end), HistoryOnly's
// history is done, fn returns an error (returned as is), ctx ends (its
// error, as a status), or the server refuses the watch (its error). Each
// event given to fn has a seq above the last one's.
func (w *Watch) Run(ctx context.Context, fn func(*falconv1.ExpEvent) error) error {
	sleep, now := w.Sleep, w.Now
	if sleep == nil {
		sleep = sleepCtx
	}
	if now == nil {
		now = time.Now
	}
	grace := w.Grace
	if grace <= 0 {
		grace = FirstAnswerGrace
	}
	start := now()
	answered := false
	last := w.AfterSeq
	for attempt := 0; ; attempt++ {
		err := w.stream(ctx, last, func(ev *falconv1.ExpEvent) error {
			if !answered || attempt > 0 {
				answered, attempt = true, 0 // a stream that answers starts the backoff over
			}
			if ev.GetKind() != "" && ev.GetSeq() > last {
				if err := fn(ev); err != nil {
					return &callerError{err}
				}
				last = ev.GetSeq()
			}
			if ev.GetTerminal() {
				return errEnded
			}
			return nil
		})
		var ce *callerError
		switch {
		case errors.As(err, &ce):
			return ce.err
		case errors.Is(err, errEnded):
			return nil
		case errors.Is(err, io.EOF) && w.HistoryOnly:
			return nil
		case errors.Is(err, io.EOF):
			// Closed without the terminal event: cut, not finished.
			err = status.Error(codes.Unavailable, "the event stream closed before the experiment ended")
		case err != nil && ctx.Err() != nil:
			return status.FromContextError(ctx.Err()).Err()
		case err != nil && !Transient(err):
			return err
		case err != nil && !answered && now().Sub(start) >= grace:
			return err
		}
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
		if w.OnBreak != nil && answered {
			w.OnBreak(err)
		}
		if serr := sleep(ctx, backoff(attempt)); serr != nil {
			return status.FromContextError(serr).Err()
		}
	}
}

var errEnded = errors.New("the experiment ended")

// callerError is fn's error, kept apart from the stream's own.
type callerError struct{ err error }

func (e *callerError) Error() string { return e.err.Error() }

// stream reads one stream after seq; it returns what ended it (io.EOF for
// a clean close).
func (w *Watch) stream(ctx context.Context, after int64, fn func(*falconv1.ExpEvent) error) error {
	s, err := w.Client.WatchExp(ctx, &falconv1.WatchExpRequest{Id: w.ID, AfterSeq: after, HistoryOnly: w.HistoryOnly})
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		ev, err := s.Recv()
		if err != nil {
			return err
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// Transient errors are worth another attempt: the server restarting, a
// connection cut, or the server stopping the stream as it shuts down.
func Transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted:
		return true
	}
	return false
}

// backoff is the wait before attempt+1: quick at first, for a restart that
// takes a second, then every 2s.
func backoff(attempt int) time.Duration {
	return min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
