package queue_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

func TestWaitingMessages(t *testing.T) {
	many := func(actor string, n int) []queue.Job {
		var js []queue.Job
		for i := 1; i <= n; i++ {
			js = append(js, job(fmt.Sprintf("%s%d", actor[:1], i), actor, i))
		}
		return js
	}
	tests := []struct {
		name      string
		opts      []queue.Option
		jobs      []queue.Job
		acquiring bool // pick the first job before asking
		want      []string
	}{
		{
			name: "empty queue",
		},
		{
			name: "positions follow the round-robin, not FIFO",
			jobs: []queue.Job{job("a1", "user-a", 1), job("a2", "user-a", 2), job("b1", "user-b", 3)},
			want: []string{
				"queue position #1, next in line",
				"queue position #2, 1 ahead: user-a: a1-v7x",
				"queue position #3, 2 ahead: user-a: a1-v7x, user-b: b1-v7x",
			},
		},
		{
			name:      "the front job says what it waits for",
			jobs:      []queue.Job{job("a1", "user-a", 1), job("a2", "user-a", 2), job("b1", "user-b", 3)},
			acquiring: true,
			want: []string{
				"queue position #1, next in line, waiting for user-a: a1-v7x to finish acquiring resources",
				"queue position #2, 1 ahead: user-b: b1-v7x",
			},
		},
		{
			name: "the list stops at 5 and counts the rest",
			jobs: many("alice", 8),
			want: []string{
				"queue position #1, next in line",
				"queue position #2, 1 ahead: alice: a1-v7x",
				"queue position #3, 2 ahead: alice: a1-v7x, alice: a2-v7x",
				"queue position #4, 3 ahead: alice: a1-v7x, alice: a2-v7x, alice: a3-v7x",
				"queue position #5, 4 ahead: alice: a1-v7x, alice: a2-v7x, alice: a3-v7x, alice: a4-v7x",
				"queue position #6, 5 ahead: alice: a1-v7x, alice: a2-v7x, alice: a3-v7x, alice: a4-v7x, alice: a5-v7x",
				"queue position #7, 6 ahead: alice: a1-v7x, alice: a2-v7x, alice: a3-v7x, alice: a4-v7x, alice: a5-v7x and 1 more",
				"queue position #8, 7 ahead: alice: a1-v7x, alice: a2-v7x, alice: a3-v7x, alice: a4-v7x, alice: a5-v7x and 2 more",
			},
		},
		{
			name: "a configured limit",
			opts: []queue.Option{queue.WithAheadLimit(1)},
			jobs: many("alice", 3),
			want: []string{
				"queue position #1, next in line",
				"queue position #2, 1 ahead: alice: a1-v7x",
				"queue position #3, 2 ahead: alice: a1-v7x and 1 more",
			},
		},
		{
			name: "limit 0 gives counts only",
			opts: []queue.Option{queue.WithAheadLimit(0)},
			jobs: many("alice", 2),
			want: []string{"queue position #1, next in line", "queue position #2, 1 ahead"},
		},
		{
			name: "a job without a name shows its ID",
			jobs: []queue.Job{{ID: "j-1", Actor: "alice", AcceleratorType: "v7x", Topology: "2x2x4", Created: t0}, job("a2", "alice", 2)},
			want: []string{"queue position #1, next in line", "queue position #2, 1 ahead: alice: j-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := queue.New(tt.opts...)
			add(t, s, k, tt.jobs...)
			if tt.acquiring {
				s.Pick(k)
			}
			var got []string
			for _, p := range s.Waiting(k) {
				got = append(got, p.Message())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWaitingPositions(t *testing.T) {
	s := queue.New(queue.WithAheadLimit(2))
	add(t, s, k, job("a1", "alice", 1), job("a2", "alice", 2), job("b1", "bob", 3), job("c1", "carol", 4))
	s.Pick(k)
	ref := func(id, actor string) queue.Ref { return queue.Ref{ID: id, Actor: actor, Name: id + "-v7x"} }
	holder := ref("a1", "alice")
	want := []queue.Position{
		{Ref: ref("b1", "bob"), Pos: 1, Ahead: []queue.Ref{}, Acquiring: &holder},
		{Ref: ref("a2", "alice"), Pos: 2, Ahead: []queue.Ref{ref("b1", "bob")}, Acquiring: &holder},
		{Ref: ref("c1", "carol"), Pos: 3, Ahead: []queue.Ref{ref("b1", "bob"), ref("a2", "alice")}, Acquiring: &holder},
	}
	got := s.Waiting(k)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Waiting (-want +got):\n%s", diff)
	}
	// The queue moving on must not rewrite what the caller already holds.
	s.Release("a1")
	s.Pick(k)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("earlier Waiting result after a Pick (-want +got):\n%s", diff)
	}
}

func TestAppendWaitingReusesTheBuffer(t *testing.T) {
	s := queue.New(queue.WithAheadLimit(2))
	add(t, s, k, job("a1", "alice", 1), job("a2", "alice", 2), job("b1", "bob", 3), job("c1", "carol", 4))
	other := queue.Position{Ref: queue.Ref{ID: "x"}, Pos: 9}
	buf := make([]queue.Position, 1, 16)
	buf[0] = other
	got := s.AppendWaiting(buf, k)
	if &got[0] != &buf[0] {
		t.Error("AppendWaiting into a buffer with room allocated a new one")
	}
	if diff := cmp.Diff(append([]queue.Position{other}, s.Waiting(k)...), got); diff != "" {
		t.Errorf("AppendWaiting (-want +got):\n%s", diff)
	}
	// With the order cached, asking again into the same buffer allocates
	// only the names of the jobs ahead, however long the queue.
	if n := testing.AllocsPerRun(100, func() { buf = s.AppendWaiting(buf[:0], k) }); n > 1 {
		t.Errorf("AppendWaiting allocated %v times a call, want at most 1", n)
	}
	if got := s.AppendWaiting(nil, queue.Key{Cluster: "none", Topology: "2x2x4"}); got != nil {
		t.Errorf("AppendWaiting(nil) of an empty queue = %v, want nil", got)
	}
}
