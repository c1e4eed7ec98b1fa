package queue_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// k is the queue most tests use.
var k = queue.Key{Cluster: "c1", Topology: "2x2x4"}

// job returns a v7x 2x2x4 job created min minutes after t0.
func job(id, actor string, min int) queue.Job {
	return queue.Job{
		ID: id, Actor: actor, Name: id + "-v7x",
		AcceleratorType: "v7x", Topology: "2x2x4",
		Created: t0.Add(time.Duration(min) * time.Minute),
	}
}

func add(t testing.TB, s *queue.Scheduler, key queue.Key, jobs ...queue.Job) {
	t.Helper()
	for _, j := range jobs {
		if err := s.Add(j, key); err != nil {
			t.Fatalf("Add(%s): %v", j.ID, err)
		}
	}
}

// drain picks and releases until the queue is empty and returns the order.
func drain(t testing.TB, s *queue.Scheduler, key queue.Key) []string {
	t.Helper()
	var got []string
	for {
		j, ok := s.Pick(key)
		if !ok {
			return got
		}
		got = append(got, j.ID)
		if err := s.Release(j.ID); err != nil {
			t.Fatalf("Release(%s): %v", j.ID, err)
		}
	}
}

func waitingIDs(s *queue.Scheduler, key queue.Key) []string {
	var ids []string
	for _, p := range s.Waiting(key) {
		ids = append(ids, p.ID)
	}
	return ids
}

// fakeClock is a clock that moves only when told to.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestPickRule(t *testing.T) {
	tests := []struct {
		name       string
		lastServed string
		jobs       []queue.Job
		want       []string
	}{
		{
			name: "single actor is FIFO by created time, not insertion order",
			jobs: []queue.Job{job("a2", "alice", 2), job("a1", "alice", 1), job("a3", "alice", 3)},
			want: []string{"a1", "a2", "a3"},
		},
		{
			name: "two actors alternate",
			jobs: []queue.Job{
				job("a1", "alice", 1), job("a2", "alice", 2), job("a3", "alice", 3),
				job("b1", "bob", 4), job("b2", "bob", 5),
			},
			want: []string{"a1", "b1", "a2", "b2", "a3"},
		},
		{
			name:       "three actors: last served steps aside, earliest of the rest wins",
			lastServed: "alice",
			jobs:       []queue.Job{job("a1", "alice", 1), job("b1", "bob", 3), job("c1", "carol", 2)},
			want:       []string{"c1", "a1", "b1"},
		},
		{
			name: "three actors: earliest remaining, not strict rotation",
			jobs: []queue.Job{
				job("a1", "alice", 1), job("a2", "alice", 2), job("b1", "bob", 3), job("c1", "carol", 4),
			},
			// After b1, alice (a2 at 2) beats carol (c1 at 4): round-robin
			// only excludes the last served actor.
			want: []string{"a1", "b1", "a2", "c1"},
		},
		{
			name: "an actor with many jobs does not starve a late one",
			jobs: []queue.Job{
				job("a1", "alice", 1), job("a2", "alice", 2), job("a3", "alice", 3),
				job("a4", "alice", 4), job("a5", "alice", 5), job("b1", "bob", 60),
			},
			want: []string{"a1", "b1", "a2", "a3", "a4", "a5"},
		},
		{
			name:       "the last served actor is served again when alone",
			lastServed: "alice",
			jobs:       []queue.Job{job("a1", "alice", 1), job("a2", "alice", 2)},
			want:       []string{"a1", "a2"},
		},
		{
			name:       "last served actor with no waiting job excludes nobody",
			lastServed: "dave",
			jobs:       []queue.Job{job("b1", "bob", 2), job("a1", "alice", 1)},
			want:       []string{"a1", "b1"},
		},
		{
			name: "equal created times within an actor: ID breaks the tie",
			jobs: []queue.Job{job("a-2", "alice", 1), job("a-1", "alice", 1), job("a-0", "alice", 2)},
			want: []string{"a-1", "a-2", "a-0"},
		},
		{
			name: "equal created times across actors: ID breaks the tie",
			jobs: []queue.Job{job("x2", "alice", 1), job("x1", "bob", 1), job("x3", "carol", 1)},
			want: []string{"x1", "x2", "x3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := queue.New()
			if tt.lastServed != "" {
				s.SetLastServed(k, tt.lastServed)
			}
			add(t, s, k, tt.jobs...)
			// The positions promise the same order the picks deliver.
			if diff := cmp.Diff(tt.want, waitingIDs(s, k)); diff != "" {
				t.Errorf("Waiting order (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, drain(t, s, k)); diff != "" {
				t.Errorf("pick order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRoundRobinMemorySurvivesAnEmptyQueue(t *testing.T) {
	s := queue.New()
	add(t, s, k, job("a1", "alice", 1))
	if diff := cmp.Diff([]string{"a1"}, drain(t, s, k)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// alice was served last, so bob goes first although alice is earlier.
	add(t, s, k, job("a2", "alice", 2), job("b1", "bob", 3))
	if diff := cmp.Diff([]string{"b1", "a2"}, drain(t, s, k)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestOneAcquiringJobPerQueue(t *testing.T) {
	tests := []struct {
		name string
		free func(s *queue.Scheduler, id string) error
	}{
		{"pods running: Release", (*queue.Scheduler).Release},
		{"job ended: Remove", (*queue.Scheduler).Remove},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := queue.New()
			add(t, s, k, job("a1", "alice", 1), job("b1", "bob", 2))
			first, ok := s.Pick(k)
			if !ok || first.ID != "a1" {
				t.Fatalf("first Pick = %s, %v; want a1, true", first.ID, ok)
			}
			if j, ok := s.Pick(k); ok {
				t.Fatalf("second Pick while a1 acquires = %s; want nothing", j.ID)
			}
			if got := s.Ready(); len(got) != 0 {
				t.Errorf("Ready() = %v while the slot is held; want none", got)
			}
			if err := tt.free(s, "a1"); err != nil {
				t.Fatal(err)
			}
			if j, ok := s.Pick(k); !ok || j.ID != "b1" {
				t.Errorf("Pick after freeing = %s, %v; want b1, true", j.ID, ok)
			}
		})
	}
}

func TestQueuesAreIndependent(t *testing.T) {
	otherTopo := queue.Key{Cluster: "c1", Topology: "4x4x4"}
	otherCluster := queue.Key{Cluster: "c2", Topology: "2x2x4"}
	big := job("big", "alice", 1)
	big.Topology = "4x4x4"

	s := queue.New()
	add(t, s, k, job("a1", "alice", 1), job("a2", "alice", 2))
	add(t, s, otherTopo, big)
	add(t, s, otherCluster, job("c2-1", "alice", 3))

	if _, ok := s.Pick(k); !ok {
		t.Fatal("Pick(k) found nothing")
	}
	// k's slot is held; the others are not affected.
	if diff := cmp.Diff([]queue.Key{otherTopo, otherCluster}, s.Ready()); diff != "" {
		t.Errorf("Ready() (-want +got):\n%s", diff)
	}
	for key, want := range map[queue.Key]string{otherTopo: "big", otherCluster: "c2-1"} {
		if j, ok := s.Pick(key); !ok || j.ID != want {
			t.Errorf("Pick(%s) = %s, %v; want %s, true", key, j.ID, ok, want)
		}
	}
	if diff := cmp.Diff([]queue.Key{{"c1", "2x2x4"}, {"c1", "4x4x4"}, {"c2", "2x2x4"}}, s.Keys()); diff != "" {
		t.Errorf("Keys() (-want +got):\n%s", diff)
	}
	// A round-robin turn in one queue is not a turn in another.
	if got := s.LastServed(otherCluster); got != "alice" {
		t.Errorf("LastServed(%s) = %q; want alice", otherCluster, got)
	}
}

func TestRemove(t *testing.T) {
	tests := []struct {
		name       string
		remove     string
		wantOrder  []string
		wantPicked string // after the removal, "" if the slot stays busy
	}{
		{
			name:       "waiting job leaves the order",
			remove:     "b1",
			wantOrder:  []string{"c1", "a2", "a3"},
			wantPicked: "",
		},
		{
			name:       "head of an actor: its next job becomes the candidate",
			remove:     "a2",
			wantOrder:  []string{"b1", "a3", "c1"},
			wantPicked: "",
		},
		{
			name:       "acquiring job frees the slot",
			remove:     "a1",
			wantOrder:  []string{"b1", "a2", "c1", "a3"},
			wantPicked: "b1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := queue.New()
			add(t, s, k, job("a1", "alice", 1), job("a2", "alice", 2), job("a3", "alice", 3),
				job("b1", "bob", 4), job("c1", "carol", 5))
			if j, _ := s.Pick(k); j.ID != "a1" {
				t.Fatalf("Pick = %s; want a1", j.ID)
			}
			// Warm the cached order so removal must invalidate it.
			_ = s.Waiting(k)
			if err := s.Remove(tt.remove); err != nil {
				t.Fatal(err)
			}
			if _, _, ok := s.Lookup(tt.remove); ok {
				t.Errorf("Lookup(%s) still finds the removed job", tt.remove)
			}
			if diff := cmp.Diff(tt.wantOrder, waitingIDs(s, k)); diff != "" {
				t.Errorf("Waiting order (-want +got):\n%s", diff)
			}
			j, ok := s.Pick(k)
			if got := map[bool]string{true: j.ID}[ok]; got != tt.wantPicked {
				t.Errorf("Pick = %q; want %q", got, tt.wantPicked)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	s := queue.New()
	add(t, s, k, job("a1", "alice", 1), job("a2", "alice", 2))
	if _, ok := s.Pick(k); !ok {
		t.Fatal("Pick found nothing")
	}
	noCreated := job("x", "alice", 0)
	noCreated.Created = time.Time{}
	pinned := job("p", "alice", 0)
	pinned.PinnedCluster = "c9"

	tests := []struct {
		name string
		err  error
		want error
	}{
		{"empty ID", s.Add(job("", "alice", 1), k), queue.ErrInvalid},
		{"empty actor", s.Add(job("x", "", 1), k), queue.ErrInvalid},
		{"zero created", s.Add(noCreated, k), queue.ErrInvalid},
		{"key topology differs from job's", s.Add(job("x", "alice", 1), queue.Key{"c1", "4x4"}), queue.ErrInvalid},
		{"key cluster differs from pin", s.Add(pinned, k), queue.ErrInvalid},
		{"re-add in the same queue is a no-op", s.Add(job("a2", "alice", 2), k), nil},
		{"re-add of the acquiring job is a no-op", s.Add(job("a1", "alice", 1), k), nil},
		{"same ID in another queue", s.Add(job("a2", "alice", 2), queue.Key{"c2", "2x2x4"}), queue.ErrConflict},
		{"release a waiting job", s.Release("a2"), queue.ErrNotAcquiring},
		{"release an unknown job", s.Release("nope"), queue.ErrNotFound},
		{"remove an unknown job", s.Remove("nope"), queue.ErrNotFound},
		{"mark a second job acquiring", s.MarkAcquiring(job("a2", "alice", 2), k), queue.ErrSlotBusy},
		{"mark the holder again is a no-op", s.MarkAcquiring(job("a1", "alice", 1), k), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) || (tt.want == nil) != (tt.err == nil) {
				t.Errorf("err = %v; want %v", tt.err, tt.want)
			}
		})
	}
	if got := s.Depth(k); got != 2 {
		t.Errorf("Depth after the failed calls = %d; want 2", got)
	}
}

func TestSnapshotUsesInjectedClock(t *testing.T) {
	clk := &fakeClock{t: t0.Add(time.Hour)}
	s := queue.New(queue.WithClock(clk.now))
	add(t, s, k, job("a1", "alice", 1), job("a2", "alice", 2), job("b1", "bob", 3))
	clk.advance(7 * time.Minute)
	if _, ok := s.Pick(k); !ok {
		t.Fatal("Pick found nothing")
	}
	clk.advance(time.Minute) // a later clock must not change what was stamped
	want := []queue.Stats{{
		Key:            k,
		Waiting:        2,
		Actors:         2,
		Acquiring:      queue.Ref{ID: "a1", Actor: "alice", Name: "a1-v7x"},
		AcquiringSince: t0.Add(time.Hour + 7*time.Minute),
		LastServed:     "alice",
		OldestWaiting:  t0.Add(2 * time.Minute),
	}}
	if diff := cmp.Diff(want, s.Snapshot()); diff != "" {
		t.Errorf("Snapshot (-want +got):\n%s", diff)
	}
}

// TestRestartRebuild rebuilds a scheduler the way a restarted controller
// does, from what the job rows say, and checks it behaves like the original.
func TestRestartRebuild(t *testing.T) {
	busy := queue.Key{Cluster: "c1", Topology: "2x2x4"}
	free := queue.Key{Cluster: "c2", Topology: "2x2x4"}
	store := map[string]queue.Job{} // the job rows
	for _, j := range []queue.Job{
		job("a1", "alice", 1), job("a2", "alice", 2), job("b1", "bob", 3), job("b2", "bob", 4),
		job("f-a1", "alice", 1), job("f-a2", "alice", 2), job("f-b1", "bob", 3),
	} {
		store[j.ID] = j
	}

	orig := queue.New()
	add(t, orig, busy, store["a1"], store["a2"], store["b1"], store["b2"])
	add(t, orig, free, store["f-a1"], store["f-a2"], store["f-b1"])
	// busy: alice's a1 is provisioning. free: alice's f-a1 got Running.
	orig.Pick(busy)
	j, _ := orig.Pick(free)
	if err := orig.Release(j.ID); err != nil {
		t.Fatal(err)
	}
	snapshot := orig.Snapshot() // what a caller may persist

	type row struct {
		job       queue.Job
		key       queue.Key
		acquiring bool
	}
	// The rows a restarted controller reads, in reverse queue order:
	// rebuilding must not depend on the order rows come back in.
	rows := []row{{store["a1"], busy, true}}
	for _, key := range orig.Keys() {
		for _, p := range orig.Waiting(key) {
			rows = append([]row{{job: store[p.ID], key: key}}, rows...)
		}
	}

	rebuild := func(restoreLastServed bool) *queue.Scheduler {
		s := queue.New()
		for _, r := range rows {
			var err error
			if r.acquiring {
				err = s.MarkAcquiring(r.job, r.key)
			} else {
				err = s.Add(r.job, r.key)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if restoreLastServed {
			for _, st := range snapshot {
				s.SetLastServed(st.Key, st.LastServed)
			}
		}
		return s
	}

	t.Run("with last served restored, every queue is identical", func(t *testing.T) {
		s := rebuild(true)
		for _, key := range []queue.Key{busy, free} {
			if diff := cmp.Diff(orig.Waiting(key), s.Waiting(key)); diff != "" {
				t.Errorf("Waiting(%s) (-orig +rebuilt):\n%s", key, diff)
			}
		}
	})
	t.Run("without it, only queues with a free slot lose their turn", func(t *testing.T) {
		s := rebuild(false)
		// The acquiring job's actor is the last served: nothing lost.
		if diff := cmp.Diff(orig.Waiting(busy), s.Waiting(busy)); diff != "" {
			t.Errorf("Waiting(%s) (-orig +rebuilt):\n%s", busy, diff)
		}
		// alice was served last in the free queue, but nobody remembers:
		// she may go twice in a row, once. That is the documented loss.
		if diff := cmp.Diff([]string{"f-b1", "f-a2"}, waitingIDs(orig, free)); diff != "" {
			t.Errorf("original order (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"f-a2", "f-b1"}, waitingIDs(s, free)); diff != "" {
			t.Errorf("rebuilt order (-want +got):\n%s", diff)
		}
	})
}

// TestConcurrentUse is for the race detector: a scheduling loop, a status
// updater and API handlers may share one Scheduler.
func TestConcurrentUse(t *testing.T) {
	const workers, perWorker = 4, 200
	s := queue.New()
	var picked atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				add(t, s, k, job(fmt.Sprintf("w%d-%d", w, i), fmt.Sprint("actor", i%3), i))
				if j, ok := s.Pick(k); ok {
					picked.Add(1)
					if err := s.Release(j.ID); err != nil {
						t.Error(err)
					}
				}
				for _, p := range s.Waiting(k) {
					_ = p.Message()
				}
				_ = s.Snapshot()
			}
		})
	}
	wg.Wait()
	if got := int(picked.Load()) + len(drain(t, s, k)); got != workers*perWorker {
		t.Errorf("picked %d jobs in all; want %d", got, workers*perWorker)
	}
}
