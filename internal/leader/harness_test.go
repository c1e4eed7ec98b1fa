package leader_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/leader"
)

// referee runs candidates and fails the test if two ever lead at once.
type referee struct {
	t       *testing.T
	mu      sync.Mutex
	leaders map[string]bool
}

func newReferee(t *testing.T) *referee { return &referee{t: t, leaders: map[string]bool{}} }

// candidate is one replica campaigning.
type candidate struct {
	name    string
	stop    context.CancelFunc
	started chan time.Time // lead began
	ended   chan error     // lead returned, with the cause of its context
	done    chan struct{}  // Run returned
}

// campaign runs e.Run until the candidate is stopped. Its lead holds on
// until it loses or is told to stop, like a controller with nothing to
// drain.
func (r *referee) campaign(name string, e leader.Elector) *candidate {
	ctx, stop := context.WithCancel(context.Background())
	c := &candidate{name: name, stop: stop, started: make(chan time.Time, 16), ended: make(chan error, 16), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		err := e.Run(ctx, func(held context.Context) {
			r.enter(name)
			c.started <- time.Now()
			select {
			case <-held.Done():
			case <-ctx.Done():
			}
			r.leave(name)
			c.ended <- context.Cause(held)
		})
		if err != nil {
			r.t.Errorf("%s: Run: %v", name, err)
		}
	}()
	r.t.Cleanup(func() { stop(); <-c.done })
	return c
}

func (r *referee) enter(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for other := range r.leaders {
		r.t.Errorf("%s leads while %s still does", name, other)
	}
	r.leaders[name] = true
}

func (r *referee) leave(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.leaders, name)
}

// first waits for one of cs to start leading and returns it.
func first(t *testing.T, within time.Duration, cs ...*candidate) (*candidate, time.Time) {
	t.Helper()
	timeout := time.After(within)
	for {
		for _, c := range cs {
			select {
			case at := <-c.started:
				return c, at
			default:
			}
		}
		select {
		case <-timeout:
			t.Fatalf("no candidate led within %s", within)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ended waits for c's lead to return and gives the cause.
func ended(t *testing.T, c *candidate, within time.Duration) error {
	t.Helper()
	select {
	case err := <-c.ended:
		return err
	case <-time.After(within):
		t.Fatalf("%s still leads after %s", c.name, within)
		return nil
	}
}

func other(c, a, b *candidate) *candidate {
	if c == a {
		return b
	}
	return a
}
