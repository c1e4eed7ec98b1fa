package apiserver

import (
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/changefeed"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/store"
)

// An experiment's results are final once nothing it ran can write: at its
// end when every pod ended by itself or its cluster's stop waits for the
// processes, else once the stopped pods' grace period has passed.
func TestSettled(t *testing.T) {
	end := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		status  lifecycle.Status
		backend string
		after   time.Duration // since the end
		want    bool
		at      time.Time
	}{
		{"running", lifecycle.Running, "gke", time.Hour, false, time.Time{}},
		{"aborting", lifecycle.Aborting, "gke", time.Hour, false, time.Time{}},
		{"succeeded: every pod ended by itself", lifecycle.Succeeded, "gke", 0, true, time.Time{}},
		{"aborted on a local cluster: its stop waited for the processes", lifecycle.Aborted, "local", 0, true, time.Time{}},
		{"aborted on gke, within the grace period", lifecycle.Aborted, "gke", 59 * time.Second, false, end.Add(time.Minute)},
		{"aborted on gke, after it", lifecycle.Aborted, "gke", time.Minute, true, end.Add(time.Minute)},
		{"failed on kubernetes, within the grace period", lifecycle.Failed, "kubernetes", time.Second, false, end.Add(time.Minute)},
		{"failed on a cluster deleted since, after the grace period", lifecycle.Failed, "", 2 * time.Minute, true, end.Add(time.Minute)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{stopGrace: time.Minute, now: func() time.Time { return end.Add(tc.after) }}
			exp := &store.Experiment{Status: tc.status}
			if lifecycle.ExperimentMachine.IsTerminal(tc.status) {
				exp.FinishedAt = &end
			}
			got, at := s.settled(exp, tc.backend)
			if got != tc.want || !at.Equal(tc.at) {
				t.Errorf("settled = %v, %v; want %v, %v", got, at, tc.want, tc.at)
			}
		})
	}
}

// The grace period waited for is the one Falcon gives the pods it stops.
func TestStopGraceIsThePodsGracePeriod(t *testing.T) {
	if DefaultStopGrace != render.TerminationGracePeriod {
		t.Errorf("DefaultStopGrace %s, pods' termination grace period %s", DefaultStopGrace, render.TerminationGracePeriod)
	}
}

func TestEndedIn(t *testing.T) {
	changes := []changefeed.Change{
		{Kind: "experiment", ID: "exp-a", Ended: true},
		{Kind: "experiment", ID: "exp-b"},
		{Kind: "experiment", ID: "exp-c", Ended: true},
		{Kind: "experiment", ID: "exp-a", Ended: true},
	}
	if got := endedIn(changes); len(got) != 2 || got[0] != "exp-a" || got[1] != "exp-c" {
		t.Errorf("endedIn = %v; want [exp-a exp-c]", got)
	}
}
