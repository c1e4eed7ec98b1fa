package explain

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// TestProbeText: a cluster no probe asks (falcon dev's local one) is said
// to be so, not "never probed" as one whose first probe is still to come.
func TestProbeText(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	tests := []struct {
		name    string
		probe   *falconv1.ClusterProbe
		backend string // set for a cluster no probe asks
		want    string
	}{
		{"local", nil, "local", "not probed (local cluster)"},
		{"not yet", nil, "", "never probed"},
		{"unreachable", &falconv1.ClusterProbe{Error: "dial tcp: refused", ProbedAt: at}, "", "unreachable: dial tcp: refused (probed 2026-12-07T10:00:00Z)"},
		{"reachable", &falconv1.ClusterProbe{Reachable: true, QueueDepth: proto.Int32(2), RunningCount: proto.Int32(1), ProbedAt: at}, "",
			"reachable, 2 queued, 1 running (probed 2026-12-07T10:00:00Z)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := probeText(tt.probe, tt.backend); got != tt.want {
				t.Errorf("probeText = %q, want %q", got, tt.want)
			}
		})
	}
	var b strings.Builder
	candidates(&b, &falconv1.ClusterSelection{Candidates: []*falconv1.SelectionCandidate{{Cluster: "local", Rank: 1}, {Cluster: "edge", Rank: 2}}},
		map[string]string{"local": "local"})
	if got := b.String(); !strings.Contains(got, "local            chosen: queue_depth=0 max=unbounded priority 0, idle pools 0, probe: not probed (local cluster)") ||
		!strings.Contains(got, "edge             ranked 2: queue_depth=0 max=unbounded priority 0, idle pools 0, probe: never probed") {
		t.Errorf("candidates:\n%s", got)
	}
}
