package gke

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGroupNameLeavesRoomForEverySlice(t *testing.T) {
	for _, id := range []string{"job-abc", "job-" + strings.Repeat("x", 60)} {
		g, err := GroupName(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range groupMembers(g, 64) {
			if len(m) > maxPoolName || !poolNameRE.MatchString(m) {
				t.Errorf("member %q of job %s is not a GKE node pool name", m, id)
			}
		}
	}
}

func TestGroupPools(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	member := func(name, status string, created time.Time, slices string) PoolInfo {
		return PoolInfo{Name: name, Status: status, Nodes: 2, CreatedAt: created, JobID: "job-a",
			Labels: map[string]string{LabelSliceGroup: "falcon-job-a", LabelSlices: slices, LabelTopology: "2x2x2"}}
	}
	single := PoolInfo{Name: "falcon-job-b", Status: "RUNNING", Nodes: 2, Labels: map[string]string{LabelTopology: "2x2x2"}}
	tests := []struct {
		name    string
		in      []PoolInfo
		refused bool // GKE refused a member
		status  string
		nodes   int64
		created time.Time
	}{
		{"every member running", []PoolInfo{member("falcon-job-a-s0", "RUNNING", t0, "2"), member("falcon-job-a-s1", "RUNNING", t0.Add(time.Second), "2")}, false,
			"RUNNING", 4, t0},
		{"one member still provisioning", []PoolInfo{member("falcon-job-a-s0", "RUNNING", t0, "2"), member("falcon-job-a-s1", "PROVISIONING", t0, "2")}, false,
			"PROVISIONING", 4, t0},
		{"one member failed", []PoolInfo{member("falcon-job-a-s0", "ERROR", t0, "2"), member("falcon-job-a-s1", "RUNNING", t0, "2")}, false,
			"ERROR", 4, t0},
		{"one member being deleted", []PoolInfo{member("falcon-job-a-s0", "RUNNING", t0, "2"), member("falcon-job-a-s1", "STOPPING", t0, "2")}, false,
			"STOPPING", 4, t0},
		{"a member missing (a create cut short) is provisioning", []PoolInfo{member("falcon-job-a-s1", "RUNNING", t0.Add(time.Second), "2")}, false,
			"PROVISIONING", 2, t0.Add(time.Second)},
		{"a member GKE refused: failed, to be deleted rather than reused", []PoolInfo{member("falcon-job-a-s0", "RUNNING", t0, "2")}, true,
			"ERROR", 2, t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := groupPools(append([]PoolInfo{single}, tt.in...), func(string) bool { return tt.refused })
			if len(got) != 2 || got[0].Name != single.Name {
				t.Fatalf("groupPools = %+v, want the single pool and one group", got)
			}
			g := got[1]
			if diff := cmp.Diff([]any{"falcon-job-a", tt.status, tt.nodes, tt.created, 2}, []any{g.Name, g.Status, g.Nodes, g.CreatedAt, groupSize(g)}); diff != "" {
				t.Errorf("group (-want +got):\n%s", diff)
			}
		})
	}
}
