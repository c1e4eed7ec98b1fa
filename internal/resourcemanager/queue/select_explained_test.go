package queue_test

import (
	stdcmp "cmp"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

var probedAt = time.Date(2026, 3, 1, 8, 59, 30, 0, time.UTC)

// reg gives a cluster the registry's priority p for v7x (1 first), as the
// resource manager passes it: Accelerators holds -p so higher is better.
func reg(p int) func(*queue.Cluster) {
	return func(c *queue.Cluster) {
		c.Accelerators["v7x"] = -p
		c.RegistryPriority = map[string]int{"v7x": p}
	}
}

func up(queued int) func(*queue.Cluster) {
	return func(c *queue.Cluster) {
		c.Probe = &queue.Probe{Reachable: true, QueueDepth: queued, RunningCount: 1, ProbedAt: probedAt}
	}
}

func down(why string) func(*queue.Cluster) {
	return func(c *queue.Cluster) { c.Probe = &queue.Probe{Error: why, ProbedAt: probedAt} }
}

// TestSelector holds design 001's acceptance table 3 (ClusterSelector) row by
// row, under the priority policy, plus the reasons the default policy gives.
func TestSelector(t *testing.T) {
	tests := []struct {
		name       string
		policy     queue.Policy
		clusters   []queue.Cluster
		depths     map[string]int // Falcon's own queue for 2x2x4
		want       string         // selected cluster
		wantReason string
		wantErr    string // the UnplaceableError's message
		wantNoAvl  string // the NoAvailableClusterError text of the record
	}{
		{
			name:       "single candidate",
			policy:     queue.PolicyPriority,
			clusters:   []queue.Cluster{cl("edge-a", reg(1), up(2), maxDepth(5))},
			want:       "edge-a",
			wantReason: "selected edge-a: reachable, queue_depth=2 <= max=5, priority 1",
		},
		{
			name:   "priority order",
			policy: queue.PolicyPriority,
			clusters: []queue.Cluster{
				cl("edge-c", reg(3), up(0)), cl("edge-a", reg(1), up(4), maxDepth(5)), cl("edge-b", reg(2), up(0)),
			},
			want:       "edge-a",
			wantReason: "selected edge-a: reachable, queue_depth=4 <= max=5, priority 1",
		},
		{
			name:   "priority order skips an unreachable cluster",
			policy: queue.PolicyPriority,
			clusters: []queue.Cluster{
				cl("edge-a", reg(1), down("probe timed out after 3s")), cl("edge-b", reg(2), up(0)), cl("edge-c", reg(3), up(0)),
			},
			want:       "edge-b",
			wantReason: "selected edge-b: reachable, queue_depth=0 <= max=unbounded, priority 2",
		},
		{
			name:   "full queue skipped",
			policy: queue.PolicyPriority,
			clusters: []queue.Cluster{
				cl("edge-a", reg(1), up(6), maxDepth(5)), cl("edge-b", reg(2), up(5), maxDepth(5)),
			},
			want:       "edge-b",
			wantReason: "selected edge-b: reachable, queue_depth=5 <= max=5, priority 2",
		},
		{
			name:       "full queue counts Falcon's own queue when deeper than the probe's",
			policy:     queue.PolicyPriority,
			clusters:   []queue.Cluster{cl("edge-a", reg(1), up(0), maxDepth(2)), cl("edge-b", reg(2), up(0), maxDepth(2))},
			depths:     map[string]int{"edge-a": 3},
			want:       "edge-b",
			wantReason: "selected edge-b: reachable, queue_depth=0 <= max=2, priority 2",
		},
		{
			name:   "all failing",
			policy: queue.PolicyPriority,
			clusters: []queue.Cluster{
				cl("edge-a", reg(1), down("probe timed out after 3s")),
				cl("edge-b", reg(2), down("xpk: exit status 1: ERROR: (gcloud) permission denied")),
				cl("edge-c", reg(3), up(9), maxDepth(5)),
				cl("edge-d", reg(4)),
			},
			wantErr: "no available cluster for v7x 2x2x4: " +
				"edge-a: unreachable; unreachable: probe timed out after 3s (probed 2026-03-01T08:59:30Z); " +
				"edge-b: unreachable; unreachable: xpk: exit status 1: ERROR: (gcloud) permission denied (probed 2026-03-01T08:59:30Z); " +
				"edge-c: queue_depth=9 > max=5; reachable, queue_depth=9, running=1 (probed 2026-03-01T08:59:30Z); " +
				"edge-d: not probed yet; never probed",
		},
		{
			name:      "no candidate",
			policy:    queue.PolicyPriority,
			clusters:  []queue.Cluster{cl("edge-a", offersOnly("v6e"), up(0))},
			wantErr:   "no active cluster offers v7x",
			wantNoAvl: "no cluster supports v7x: edge-a: does not offer v7x; reachable, queue_depth=0, running=1 (probed 2026-03-01T08:59:30Z)",
		},
		{
			name:      "no candidate: no cluster registered",
			policy:    queue.PolicyPriority,
			wantErr:   "no active cluster offers v7x",
			wantNoAvl: "no cluster supports v7x: no cluster is registered",
		},
		{
			name:       "default policy: an idle pool of the shape",
			clusters:   []queue.Cluster{cl("edge-a", reg(1)), cl("edge-b", reg(2), idle("2x2x4"))},
			depths:     map[string]int{"edge-b": 1},
			want:       "edge-b",
			wantReason: "selected edge-b: idle 2x2x4 pool (1 idle), queue_depth=1",
		},
		{
			name:       "default policy: the shortest queue, whatever the probe says",
			clusters:   []queue.Cluster{cl("edge-a", reg(1), up(7)), cl("edge-b", reg(2), down("refused"), maxDepth(5))},
			depths:     map[string]int{"edge-a": 1},
			want:       "edge-b",
			wantReason: "selected edge-b: shortest queue for 2x2x4, queue_depth=0 < max=5, priority 2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := queue.New(queue.WithClock(func() time.Time { return t0 }))
			for c, n := range tt.depths {
				for i := range n {
					add(t, s, queue.Key{Cluster: c, Topology: "2x2x4"}, job(fmt.Sprintf("%s-%d", c, i), "filler", i))
				}
			}
			sel, err := s.SelectExplained(job("new", "alice", 100), tt.clusters, tt.policy)
			if tt.wantErr != "" {
				var u *queue.UnplaceableError
				if !errors.As(err, &u) || u.Message != tt.wantErr {
					t.Fatalf("error = %v;\nwant UnplaceableError %q", err, tt.wantErr)
				}
				want := stdcmp.Or(tt.wantNoAvl, tt.wantErr)
				if got := (&queue.NoAvailableClusterError{Selection: sel}).Error(); got != want {
					t.Errorf("NoAvailableClusterError =\n%q; want\n%q", got, want)
				}
				if sel.Selected != "" || sel.Key() != (queue.Key{}) {
					t.Errorf("Selected = %q on failure", sel.Selected)
				}
				if len(sel.Candidates) != len(tt.clusters) {
					t.Errorf("record holds %d candidates; want all %d", len(sel.Candidates), len(tt.clusters))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sel.Selected != tt.want || sel.Reason != tt.wantReason {
				t.Errorf("selected %s, %q;\nwant %s, %q", sel.Selected, sel.Reason, tt.want, tt.wantReason)
			}
			// The record agrees with Select's own answer.
			if tt.policy == "" {
				k, err := s.Select(job("new", "alice", 100), tt.clusters)
				if err != nil || k != sel.Key() {
					t.Errorf("Select = %v, %v; record says %v", k, err, sel.Key())
				}
			}
		})
	}
}

// TestSelectionRecordIsComplete is table 3's last row: the record holds the
// candidates, every probe result, the cluster chosen, the reason and the
// time.
func TestSelectionRecordIsComplete(t *testing.T) {
	s := queue.New(queue.WithClock(func() time.Time { return t0 }))
	add(t, s, queue.Key{Cluster: "edge-b", Topology: "2x2x4"}, job("b-0", "bob", 0))
	clusters := []queue.Cluster{
		cl("edge-c", reg(3), up(0), inactive),
		cl("edge-a", reg(1), down("probe timed out after 3s"), maxDepth(5)),
		cl("edge-b", reg(2), up(2), maxDepth(5)),
		cl("edge-d", offersOnly("v6e"), up(0)),
		cl("edge-e", reg(4), up(1)),
	}
	got, err := s.SelectExplained(job("new", "alice", 100), clusters, queue.PolicyPriority)
	if err != nil {
		t.Fatal(err)
	}
	reach := func(q int) *queue.Probe {
		return &queue.Probe{Reachable: true, QueueDepth: q, RunningCount: 1, ProbedAt: probedAt}
	}
	want := queue.Selection{
		JobID: "new", AcceleratorType: "v7x", Topology: "2x2x4", Policy: queue.PolicyPriority,
		Candidates: []queue.Candidate{
			{Cluster: "edge-b", Active: true, Offers: true, Priority: 2, Probe: reach(2), QueueDepth: 1, MaxQueueDepth: 5, Rank: 1},
			{Cluster: "edge-e", Active: true, Offers: true, Priority: 4, Probe: reach(1), Rank: 2},
			{Cluster: "edge-a", Active: true, Offers: true, Priority: 1, Probe: &queue.Probe{Error: "probe timed out after 3s", ProbedAt: probedAt}, MaxQueueDepth: 5, Rejected: "unreachable"},
			{Cluster: "edge-c", Offers: true, Priority: 3, Probe: reach(0), Rejected: "not active"},
			{Cluster: "edge-d", Active: true, Probe: reach(0), Rejected: "does not offer v7x"},
		},
		Selected:  "edge-b",
		Reason:    "selected edge-b: reachable, queue_depth=2 <= max=5, priority 2",
		DecidedAt: t0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	// Enqueue keeps the same record and queues the job where it says.
	k, sel, err := s.EnqueueExplained(job("new", "alice", 100), clusters, queue.PolicyPriority)
	if err != nil || k != got.Key() || sel.Reason != got.Reason {
		t.Errorf("EnqueueExplained = %v, %q, %v; want %v, %q", k, sel.Reason, err, got.Key(), got.Reason)
	}
	if kept, ok := s.Selection("new"); !ok || kept.Reason != got.Reason {
		t.Errorf("Selection(new) = %q, %v; want the record kept", kept.Reason, ok)
	}
	if _, again, _ := s.EnqueueExplained(job("new", "alice", 100), clusters, queue.PolicyPriority); again.Selected != "" {
		t.Errorf("re-enqueue made a new record %q; the job was placed before", again.Reason)
	}
}

func TestSelectPinnedRecord(t *testing.T) {
	j := job("new", "alice", 100)
	j.PinnedCluster = "edge-b"
	for _, p := range queue.Policies {
		t.Run(string(p), func(t *testing.T) {
			sel, err := queue.Explain(j, []queue.Cluster{cl("edge-a", reg(1), up(0)), cl("edge-b", reg(2), up(0))},
				func(queue.Key) int { return 0 }, p, t0)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(sel.Reason, "selected edge-b: the job is pinned to it") {
				t.Errorf("reason %q", sel.Reason)
			}
			if got := sel.Candidates[1].Rejected; got != "the job is pinned to edge-b" {
				t.Errorf("edge-a rejected for %q", got)
			}
		})
	}
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    queue.Policy
		wantErr string
	}{
		{in: "", want: queue.PolicySpread},
		{in: "spread", want: queue.PolicySpread},
		{in: "priority", want: queue.PolicyPriority},
		{in: "fastest", wantErr: `selection "fastest": allowed values are spread (the default) and priority`},
	}
	for _, tt := range tests {
		got, err := queue.ParsePolicy(tt.in)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("ParsePolicy(%q) error = %v; want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
