package exp

import (
	"maps"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
)

func TestTTLDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(d)) }
	started := at(-time.Hour)
	tests := []struct {
		name   string
		exp    *falconv1.Experiment
		warned map[string]time.Time
		due    bool
	}{
		{"no ttl", &falconv1.Experiment{Status: "Running", StartedAt: started}, nil, false},
		{"not started", &falconv1.Experiment{Status: "Created", Ttl: durationpb.New(time.Minute)}, nil, false},
		{"far from expiry", &falconv1.Experiment{Status: "Running", StartedAt: started, ExpiresAt: at(time.Hour)}, nil, false},
		{"inside the warning window", &falconv1.Experiment{Status: "Running", StartedAt: started, ExpiresAt: at(lifecycle.TTLWarning - time.Second)}, nil, true},
		{"warned for this expiry", &falconv1.Experiment{Id: "e", Status: "Running", StartedAt: started, ExpiresAt: at(time.Minute)},
			map[string]time.Time{"e": now.Add(time.Minute)}, false},
		{"warned for an earlier expiry (extended since)", &falconv1.Experiment{Id: "e", Status: "Running", StartedAt: started, ExpiresAt: at(time.Minute)},
			map[string]time.Time{"e": now.Add(-time.Hour)}, true},
		{"expired", &falconv1.Experiment{Id: "e", Status: "Running", StartedAt: started, ExpiresAt: at(0)},
			map[string]time.Time{"e": now}, true},
		{"already aborting", &falconv1.Experiment{Status: "Aborting", StartedAt: started, ExpiresAt: at(-time.Minute)}, nil, false},
		{"ended", &falconv1.Experiment{Status: "Aborted", StartedAt: started, ExpiresAt: at(-time.Minute)}, nil, false},
		{"idle since start", &falconv1.Experiment{Status: "Running", StartedAt: started, IdleTtl: durationpb.New(time.Hour)}, nil, true},
		{"active recently", &falconv1.Experiment{Status: "Running", StartedAt: started, IdleTtl: durationpb.New(time.Hour), ActiveAt: at(-time.Minute)}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.exp.Id == "" {
				tt.exp.Id = "e"
			}
			got := slices.Contains(ttlDue(slices.Values([]*falconv1.Experiment{tt.exp}), now, tt.warned), "e")
			if got != tt.due {
				t.Errorf("due = %v, want %v", got, tt.due)
			}
		})
	}
}

// TestTTLDueIsSorted: the live set is a map, so the server is asked in ID
// order, not in whatever order the map yields.
func TestTTLDueIsSorted(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	live := map[string]*falconv1.Experiment{}
	var want []string
	for _, id := range []string{"e-c", "e-a", "e-d", "e-b"} {
		live[id] = &falconv1.Experiment{Id: id, Status: "Running", StartedAt: timestamppb.New(now.Add(-time.Hour)), ExpiresAt: timestamppb.New(now)}
		want = append(want, id)
	}
	live["e-far"] = &falconv1.Experiment{Id: "e-far", Status: "Running", StartedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(time.Hour))}
	slices.Sort(want)
	for range 5 {
		if got := ttlDue(maps.Values(live), now, nil); !slices.Equal(got, want) {
			t.Fatalf("ttlDue = %v, want %v", got, want)
		}
	}
}
