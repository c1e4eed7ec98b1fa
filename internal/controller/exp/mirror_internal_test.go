package exp

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
)

func TestMirrorDue(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	mirror := lifecycle.Plan{Exp: []lifecycle.Update{{ID: "e", From: lifecycle.Created, To: lifecycle.Created, Reason: "Next", Message: "next in line"}}}
	jobAt := func(ago ...time.Duration) []*falconv1.Job {
		var js []*falconv1.Job
		for _, a := range ago {
			js = append(js, &falconv1.Job{UpdatedAt: timestamppb.New(now.Add(-a))})
		}
		return js
	}
	for _, tt := range []struct {
		name      string
		p         lifecycle.Plan
		jobs      []*falconv1.Job
		heldSince time.Time
		want      time.Time
	}{
		{"a mirror of a state just written waits for the grace", mirror, jobAt(200 * time.Millisecond), time.Time{}, now.Add(800 * time.Millisecond)},
		{"the newest job's state counts", mirror, jobAt(10*time.Second, 100*time.Millisecond), time.Time{}, now.Add(900 * time.Millisecond)},
		{"a state that held for the grace is mirrored now", mirror, jobAt(time.Second), time.Time{}, time.Time{}},
		{"a mirror held for mirrorMaxWait is written although its job keeps moving", mirror, jobAt(0), now.Add(-mirrorMaxWait), time.Time{}},
		{"a held mirror waits no longer than mirrorMaxWait in all", mirror, jobAt(0), now.Add(-4700 * time.Millisecond), now.Add(300 * time.Millisecond)},
		{"a move to Running is never held", lifecycle.Plan{Exp: []lifecycle.Update{{From: lifecycle.Created, To: lifecycle.Running}}}, jobAt(0), time.Time{}, time.Time{}},
		{"an end is never held", lifecycle.Plan{Exp: []lifecycle.Update{{From: lifecycle.Running, To: lifecycle.Running}}, Artifact: &lifecycle.Update{}}, jobAt(0), time.Time{}, time.Time{}},
		{"sibling aborts are never held", lifecycle.Plan{Exp: mirror.Exp, AbortJobs: []lifecycle.Update{{ID: "j"}}}, jobAt(0), time.Time{}, time.Time{}},
		{"a Running experiment's message is never held", lifecycle.Plan{Exp: []lifecycle.Update{{From: lifecycle.Running, To: lifecycle.Running, Message: "1/2 roles running"}}}, jobAt(0), time.Time{}, time.Time{}},
		{"nothing to write", lifecycle.Plan{}, jobAt(0), time.Time{}, time.Time{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := mirrorDue(tt.p, tt.jobs, tt.heldSince, now); !got.Equal(tt.want) {
				t.Errorf("mirrorDue = %v, want %v", got, tt.want)
			}
		})
	}
}
