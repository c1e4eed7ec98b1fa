package sqlstore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// queued reports how many writers wait at g.
func (g *writeGate) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.urgent) + len(g.other)
}

// The gate hands itself to waiting status writes before any other
// waiting write, each class in arrival order; a waiter whose context ends
// leaves the queue without the gate; a nil gate admits everyone.
func TestWriteGateOrder(t *testing.T) {
	tests := []struct {
		name    string
		arrive  []string // the waiters, in arrival order: "u..." urgent
		granted []string
	}{
		{"status writes first", []string{"o1", "u1", "o2", "u2"}, []string{"u1", "u2", "o1", "o2"}},
		{"others in arrival order", []string{"o1", "o2", "o3"}, []string{"o1", "o2", "o3"}},
		{"status writes in arrival order", []string{"u1", "u2"}, []string{"u1", "u2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &writeGate{}
			ctx := context.Background()
			if err := g.enter(ctx, false); err != nil {
				t.Fatal(err)
			}
			order := make(chan string, len(tc.arrive))
			for i, w := range tc.arrive {
				go func() {
					if err := g.enter(ctx, w[0] == 'u'); err != nil {
						t.Error(err)
						return
					}
					order <- w
					g.leave()
				}()
				waitQueued(t, g, i+1)
			}
			g.leave()
			var got []string
			for range tc.arrive {
				got = append(got, <-order)
			}
			if !slices.Equal(got, tc.granted) {
				t.Errorf("granted %v, want %v", got, tc.granted)
			}
		})
	}
}

func TestWriteGateCancel(t *testing.T) {
	g := &writeGate{}
	if err := g.enter(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.enter(ctx, true) }()
	waitQueued(t, g, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled waiter: %v, want context.Canceled", err)
	}
	if n := g.queued(); n != 0 {
		t.Fatalf("%d waiters left after the cancel", n)
	}
	g.leave()
	// Free again: the next writer enters at once.
	short, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := g.enter(short, false); err != nil {
		t.Fatalf("enter after the cancelled waiter: %v", err)
	}
	var none *writeGate
	if err := none.enter(context.Background(), false); err != nil {
		t.Fatalf("a nil gate: %v", err)
	}
	none.leave()
}

func waitQueued(t *testing.T, g *writeGate, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); g.queued() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters queued, want %d", g.queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
