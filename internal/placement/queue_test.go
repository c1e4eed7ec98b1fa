package placement

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

func TestQueueCluster(t *testing.T) {
	c := &falconv1.Cluster{Name: "edge-a", MaxQueueDepth: 5,
		Accelerators:     []*falconv1.AcceleratorSlot{{Type: "v7x", Priority: 1}, {Type: "v6e", Priority: 2}},
		AcceleratorTypes: []string{"v7x", "v6e", "tpu-v5p"}}
	qc := QueueCluster(c)
	if qc.Name != "edge-a" || qc.MaxQueueDepth != 5 || qc.Active {
		t.Errorf("cluster %+v: want its name and bound, Active left to the caller", qc)
	}
	// The scheduler prefers higher; the record shows the registry's own.
	for typ, want := range map[string][2]int{"v7x": {-1, 1}, "v6e": {-2, 2}} {
		if got := qc.Accelerators[typ]; got != want[0] {
			t.Errorf("%s: scheduler preference %d, want %d", typ, got, want[0])
		}
		if got := qc.RegistryPriority[typ]; got != want[1] {
			t.Errorf("%s: registry priority %d, want %d", typ, got, want[1])
		}
	}
	if _, ok := qc.RegistryPriority["v5p"]; ok || qc.Accelerators["v5p"] >= 0 {
		t.Errorf("a type listed without a slot: registry priority %v, preference %d; want none and below the slots", qc.RegistryPriority, qc.Accelerators["v5p"])
	}
	if got := QueueCluster(&falconv1.Cluster{Name: "local"}); len(got.Accelerators) != 0 || got.RegistryPriority != nil {
		t.Errorf("a fallback cluster: %+v, want no types (the caller adds what it takes)", got)
	}
	if QueueProbe(nil) != nil {
		t.Error("no probe: want nil")
	}
}

func TestQueueKey(t *testing.T) {
	for _, tc := range []struct {
		ts   *falconv1.TaskSpec
		want string
	}{
		{&falconv1.TaskSpec{DeviceType: "tpu7x", DeviceTopo: "2X2X4"}, "v7x:2x2x4"},
		{&falconv1.TaskSpec{DeviceType: "h100"}, "nvidia-h100-80gb:8"},
		{&falconv1.TaskSpec{DeviceType: "h100", DeviceCount: 4}, "nvidia-h100-80gb:4"},
		{&falconv1.TaskSpec{}, "cpu"},
		{&falconv1.TaskSpec{DeviceType: "Quantum", DeviceTopo: "1x1"}, "quantum:1x1"},
	} {
		if got := QueueKey(tc.ts); got != tc.want {
			t.Errorf("QueueKey(%v) = %q, want %q", tc.ts, got, tc.want)
		}
	}
}

// TestSelectionRecord: an unreachable cluster's probe has no counts in the
// record (it had none to give), a reachable one's has them, even zero.
func TestSelectionRecord(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	sel := queue.Selection{AcceleratorType: "tpu-v7x", Topology: "2x2x1", Policy: queue.PolicyPriority,
		Selected: "edge-a", Reason: "selected edge-a", DecidedAt: at,
		Candidates: []queue.Candidate{
			{Cluster: "edge-a", Active: true, Offers: true, Priority: 1, Rank: 1, QueueDepth: 2, MaxQueueDepth: 5, IdlePools: 1,
				Probe: &queue.Probe{Reachable: true, ProbedAt: at}},
			{Cluster: "edge-b", Active: true, Offers: true, Priority: 2, Rejected: "unreachable: dial tcp",
				Probe: &queue.Probe{Reachable: false, Error: "dial tcp", ProbedAt: at}},
			{Cluster: "edge-c", Offers: false, Rejected: "does not offer tpu-v7x"},
		}}
	got := SelectionRecord(sel)
	want := &falconv1.ClusterSelection{AcceleratorType: "tpu-v7x", Topology: "2x2x1", Policy: "priority",
		SelectedCluster: "edge-a", Reason: "selected edge-a", DecidedAt: timestamppb.New(at),
		Candidates: []*falconv1.SelectionCandidate{
			{Cluster: "edge-a", Active: true, Offers: true, Priority: 1, Rank: 1, QueueDepth: 2, MaxQueueDepth: 5, IdlePools: 1,
				Probe: &falconv1.ClusterProbe{Cluster: "edge-a", Reachable: true, QueueDepth: proto.Int32(0), RunningCount: proto.Int32(0), ProbedAt: timestamppb.New(at)}},
			{Cluster: "edge-b", Active: true, Offers: true, Priority: 2, Rejected: "unreachable: dial tcp",
				Probe: &falconv1.ClusterProbe{Cluster: "edge-b", Error: "dial tcp", ProbedAt: timestamppb.New(at)}},
			{Cluster: "edge-c", Rejected: "does not offer tpu-v7x"},
		}}
	if !proto.Equal(got, want) {
		t.Errorf("record:\n%v\nwant\n%v", got, want)
	}
}
