package watch

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Loop runs a level-triggered controller's cycles: on every change the API
// server reports that it follows (Changes) and every interval regardless, until ctx is done
// or Shutdown is called. It drains like http.Server.Shutdown: Shutdown
// starts no new cycle and waits for the one in flight; cancelling Run's ctx
// cuts that cycle. The zero Loop is ready; Run is called once.
type Loop struct {
	once    sync.Once
	closing sync.Once
	stop    chan struct{}
	stopped chan struct{}
}

func (l *Loop) init() {
	l.once.Do(func() { l.stop, l.stopped = make(chan struct{}), make(chan struct{}) })
}

// RunOn calls cycle until ctx is done or Shutdown, after each value of
// wake (Changes, or a Follower's Wake) and every interval; a cycle's error
// is logged as name's, and the loop goes on.
func (l *Loop) RunOn(ctx context.Context, wake <-chan struct{}, log *slog.Logger, interval time.Duration, name string, cycle func(context.Context) error) error {
	l.init()
	defer close(l.stopped)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if l.Stopping() {
			return nil
		}
		if err := cycle(ctx); err != nil && ctx.Err() == nil {
			log.Warn(name+" cycle failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.stop:
			return nil
		case <-wake:
		case <-t.C:
		}
	}
}

// Stopping reports whether Shutdown was called, for a cycle that does
// several things in turn and should start no new one.
func (l *Loop) Stopping() bool {
	l.init()
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// Shutdown stops Run starting cycles and waits until the one in flight has
// ended and Run returned, or until ctx is done (then cancel Run's context
// to cut the cycle). It does not wait for a Run that was never started
// beyond ctx.
func (l *Loop) Shutdown(ctx context.Context) error {
	l.init()
	l.closing.Do(func() { close(l.stop) })
	select {
	case <-l.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
