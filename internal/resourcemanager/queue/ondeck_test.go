package queue_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// A job picked ahead goes before everyone waiting, even a job that arrives
// earlier by the pick rule afterwards, and does not hold the slot.
func TestReserveThenPick(t *testing.T) {
	s := queue.New()
	add(t, s, k, job("a1", "alice", 1), job("a2", "alice", 2), job("b1", "bob", 3))
	if _, ok := s.Reserve(k); ok {
		t.Fatal("Reserve with the slot free succeeded; want Pick instead")
	}
	if j, _ := s.Pick(k); j.ID != "a1" {
		t.Fatalf("Pick = %s, want a1", j.ID)
	}
	if got := s.Reservable(); !slices.Equal(got, []queue.Key{k}) {
		t.Fatalf("Reservable() = %v, want [%v]", got, k)
	}
	// The pick rule after alice's a1 serves bob.
	deck, ok := s.Reserve(k)
	if !ok || deck.ID != "b1" {
		t.Fatalf("Reserve = %s, %v; want b1, true", deck.ID, ok)
	}
	if _, ok := s.Reserve(k); ok {
		t.Error("a second Reserve succeeded while b1 is on deck")
	}
	if got := s.Reservable(); len(got) != 0 {
		t.Errorf("Reservable() = %v with a job on deck; want none", got)
	}
	if _, phase, _ := s.Lookup("b1"); phase != queue.PhaseOnDeck {
		t.Errorf("Lookup(b1) phase = %s, want %s", phase, queue.PhaseOnDeck)
	}
	if got := s.Depth(k); got != 3 {
		t.Errorf("Depth = %d, want 3 (holder, on deck, one waiting)", got)
	}
	// A job of an actor never served, created before everyone: by the
	// pick rule it would go next, but the pick ahead stands.
	add(t, s, k, job("c0", "carol", 0))
	if _, ok := s.Pick(k); ok {
		t.Fatal("Pick while a1 holds the slot succeeded")
	}
	if got := s.Ready(); len(got) != 0 {
		t.Errorf("Ready() = %v while the slot is held; want none", got)
	}
	if err := s.Release("b1"); !errors.Is(err, queue.ErrNotAcquiring) {
		t.Errorf("Release(on deck) = %v, want ErrNotAcquiring", err)
	}
	if err := s.Release("a1"); err != nil {
		t.Fatal(err)
	}
	if got := s.Ready(); !slices.Equal(got, []queue.Key{k}) {
		t.Fatalf("Ready() = %v, want [%v]", got, k)
	}
	if j, _ := s.Pick(k); j.ID != "b1" {
		t.Fatalf("Pick after the release = %s, want b1 (on deck)", j.ID)
	}
	if err := s.Release("b1"); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, s, k); !slices.Equal(got, []string{"c0", "a2"}) {
		t.Errorf("the rest = %v, want [c0 a2]", got)
	}
}

// The job on deck is counted ahead of everyone waiting.
func TestWaitingCountsTheJobOnDeck(t *testing.T) {
	s := queue.New()
	add(t, s, k, job("a1", "alice", 1), job("b1", "bob", 2), job("c1", "carol", 3))
	s.Pick(k)
	s.Reserve(k)
	got := s.Waiting(k)
	if len(got) != 1 || got[0].ID != "c1" || got[0].Pos != 2 {
		t.Fatalf("Waiting = %+v, want c1 at #2", got)
	}
	if want := "queue position #2, 1 ahead: bob: b1-v7x"; got[0].Message() != want {
		t.Errorf("Message = %q, want %q", got[0].Message(), want)
	}
	if st := s.Snapshot(); len(st) != 1 || st[0].OnDeck.ID != "b1" || st[0].Acquiring.ID != "a1" {
		t.Errorf("Snapshot = %+v, want a1 acquiring and b1 on deck", st)
	}
}

// Removing the job on deck (aborted) lets the next waiting job be picked
// ahead; removing the holder hands the slot to the job on deck.
func TestRemoveOnDeck(t *testing.T) {
	s := queue.New()
	add(t, s, k, job("a1", "alice", 1), job("b1", "bob", 2), job("c1", "carol", 3))
	s.Pick(k)
	s.Reserve(k)
	if err := s.Remove("b1"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.Lookup("b1"); ok {
		t.Error("b1 still queued after Remove")
	}
	if j, ok := s.Reserve(k); !ok || j.ID != "c1" {
		t.Fatalf("Reserve after removing b1 = %s, %v; want c1", j.ID, ok)
	}
	if err := s.Remove("a1"); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.Pick(k); j.ID != "c1" {
		t.Errorf("Pick after the holder ended = %s, want c1", j.ID)
	}
}

// After a restart the rows say which job is on deck; MarkOnDeck restores
// it, whether or not the job was added as waiting first.
func TestMarkOnDeck(t *testing.T) {
	tests := []struct {
		name       string
		addFirst   bool
		markHolder bool
	}{
		{"new job, holder marked", false, true},
		{"waiting job, holder marked", true, true},
		{"new job, no holder left", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := queue.New()
			add(t, s, k, job("c1", "carol", 3))
			if tt.addFirst {
				add(t, s, k, job("b1", "bob", 2))
			}
			if tt.markHolder {
				if err := s.MarkAcquiring(job("a1", "alice", 1), k); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.MarkOnDeck(job("b1", "bob", 2), k); err != nil {
				t.Fatal(err)
			}
			if err := s.MarkOnDeck(job("b1", "bob", 2), k); err != nil {
				t.Errorf("marking again = %v, want nil", err)
			}
			if err := s.MarkOnDeck(job("c1", "carol", 3), k); !errors.Is(err, queue.ErrSlotBusy) {
				t.Errorf("marking a second job on deck = %v, want ErrSlotBusy", err)
			}
			if err := s.MarkOnDeck(job("b1", "bob", 2), queue.Key{Cluster: "c2", Topology: "2x2x4"}); !errors.Is(err, queue.ErrConflict) {
				t.Errorf("marking it in another queue = %v, want ErrConflict", err)
			}
			if tt.markHolder {
				if err := s.Release("a1"); err != nil {
					t.Fatal(err)
				}
			}
			if got := drain(t, s, k); !slices.Equal(got, []string{"b1", "c1"}) {
				t.Errorf("order = %v, want [b1 c1]", got)
			}
		})
	}
}

// A holder's row may be re-marked after its job was put on deck by an
// earlier rebuild step: MarkAcquiring moves it from the deck to the slot.
func TestMarkAcquiringTakesTheJobOnDeck(t *testing.T) {
	s := queue.New()
	if err := s.MarkOnDeck(job("b1", "bob", 2), k); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkAcquiring(job("b1", "bob", 2), k); err != nil {
		t.Fatal(err)
	}
	if _, phase, _ := s.Lookup("b1"); phase != queue.PhaseAcquiring {
		t.Errorf("phase = %s, want %s", phase, queue.PhaseAcquiring)
	}
	if err := s.MarkOnDeck(job("b1", "bob", 2), k); !errors.Is(err, queue.ErrConflict) {
		t.Errorf("MarkOnDeck of the holder = %v, want ErrConflict", err)
	}
}
