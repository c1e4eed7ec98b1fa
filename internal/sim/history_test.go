package sim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

func TestFromHistory(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	now := t0.Add(10 * time.Hour)
	ts := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }
	tpu := func(topo string, hosts int32) *falconv1.TaskSpec {
		return &falconv1.TaskSpec{DeviceType: "v5p", DeviceTopo: topo, Replica: hosts}
	}
	pin := &falconv1.ClusterSelection{SelectedCluster: "edge-b", Candidates: []*falconv1.SelectionCandidate{
		{Cluster: "edge-a", Rejected: "the job is pinned to edge-b"}, {Cluster: "edge-b", Rank: 1}}}
	spread := &falconv1.ClusterSelection{SelectedCluster: "edge-a", Reason: "selected edge-a: reachable, queue_depth=0 <= max=unbounded"}
	jobs := []*falconv1.Job{
		// Listed out of order: the trace is in submission order.
		{Creator: "bob@example.com", TaskSpec: tpu("2x2x1", 1), CreatedAt: ts(time.Hour), StartedAt: ts(time.Hour + 5*time.Minute),
			FinishedAt: ts(time.Hour + 25*time.Minute), ClusterName: "edge-b", Selection: pin},
		{Creator: "ana@example.com", TaskSpec: &falconv1.TaskSpec{DeviceType: "v5p", DeviceTopo: "2X2X4", Replica: 4, SupplyMode: "flex-start"},
			CreatedAt: ts(0), StartedAt: ts(7 * time.Minute), FinishedAt: ts(52 * time.Minute), ClusterName: "edge-a", Selection: spread},
		// Still running: it runs until now.
		{Creator: "ana@example.com", TaskSpec: tpu("2x2x1", 1), CreatedAt: ts(9 * time.Hour), StartedAt: ts(9*time.Hour + time.Minute), ClusterName: "edge-a"},
		{Creator: "cy@example.com", TaskSpec: tpu("2x2x1", 1), CreatedAt: ts(2 * time.Hour)}, // never started
		{Creator: "cy@example.com", TaskSpec: &falconv1.TaskSpec{Replica: 1}, CreatedAt: ts(2 * time.Hour), StartedAt: ts(2 * time.Hour), FinishedAt: ts(3 * time.Hour), ClusterName: "cpu"},
		{Creator: "cy@example.com", TaskSpec: &falconv1.TaskSpec{DeviceType: "nvidia-h100-80gb", DeviceCount: 8, Replica: 1}, CreatedAt: ts(2 * time.Hour),
			StartedAt: ts(2 * time.Hour), FinishedAt: ts(3 * time.Hour), ClusterName: "gpu"},
		{Creator: "cy@example.com", TaskSpec: &falconv1.TaskSpec{DeviceType: "v5p", DeviceTopo: "2x2x1", Replica: 1, Slices: 2}, CreatedAt: ts(2 * time.Hour),
			StartedAt: ts(2 * time.Hour), FinishedAt: ts(3 * time.Hour), ClusterName: "edge-a"},
		{Creator: "cy@example.com", TaskSpec: tpu("2x2x4", 2), CreatedAt: ts(2 * time.Hour), StartedAt: ts(2 * time.Hour), FinishedAt: ts(3 * time.Hour), ClusterName: "edge-a"},
	}
	trace, clusters, skipped := FromHistory(jobs, now)
	want := []Job{
		{T: t0, User: "ana@example.com", Accelerator: "v5p", Topology: "2x2x4", Hosts: 4, Duration: 45 * time.Minute, SupplyMode: "flex-start"},
		{T: t0.Add(time.Hour), User: "bob@example.com", Accelerator: "v5p", Topology: "2x2x1", Hosts: 1, Duration: 20 * time.Minute, Cluster: "edge-b"},
		{T: t0.Add(9 * time.Hour), User: "ana@example.com", Accelerator: "v5p", Topology: "2x2x1", Hosts: 1, Duration: 59 * time.Minute},
	}
	if diff := cmp.Diff(want, trace); diff != "" {
		t.Errorf("trace (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"edge-a", "edge-b"}, clusters); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	if want := (Skipped{NeverStarted: 1, NotTPU: 2, BadShape: 1, MultiSlice: 1}); skipped != want {
		t.Errorf("skipped %+v, want %+v", skipped, want)
	}
}
