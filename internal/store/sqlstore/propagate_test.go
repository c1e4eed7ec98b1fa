package sqlstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

// testJobWritesCarryTheirExperiment: a batch of job writes brings each
// experiment it touches in line with its jobs in the same transaction —
// artifact, then experiment, as lifecycle.Propagate plans them — and
// returns the experiments it changed. A plan that aborts sibling roles is
// left whole to the expController.
func testJobWritesCarryTheirExperiment(t *testing.T, e env) {
	type state struct{ exp, expReason, expMsg, art, artReason string }
	tests := []struct {
		name  string
		roles []string
		// before moves the experiment and its jobs into place, each
		// write on its own (UpdateJobStatus does not propagate).
		abort  bool
		before map[int][]lifecycle.Status
		// writes are the batch: role index -> expected, new status.
		writes  [][3]any // {role index, from, to}
		ttl     bool     // the experiment has a time-to-live
		want    state
		changed bool
		settled bool // nothing left for the expController
		left    bool // no status moved: the experiment is not looked at
	}{
		{
			name:    "a job's end is its experiment's",
			roles:   []string{"w"},
			before:  map[int][]lifecycle.Status{0: {lifecycle.Running}},
			writes:  [][3]any{{0, lifecycle.Running, lifecycle.Succeeded}},
			want:    state{exp: "Succeeded", art: "Succeeded"},
			changed: true,
			settled: true,
		},
		{
			name:    "straight from Pending to Succeeded passes through Running",
			roles:   []string{"w"},
			writes:  [][3]any{{0, lifecycle.Pending, lifecycle.Running}, {0, lifecycle.Running, lifecycle.Succeeded}},
			want:    state{exp: "Succeeded", art: "Succeeded"},
			changed: true,
			settled: true,
		},
		{
			name:    "a failure carries its reason and role",
			roles:   []string{"w"},
			before:  map[int][]lifecycle.Status{0: {lifecycle.Running}},
			writes:  [][3]any{{0, lifecycle.Running, lifecycle.Failed}},
			want:    state{exp: "Failed", expReason: "JobFailed", expMsg: "role w: exit 3", art: "Failed", artReason: "JobFailed"},
			changed: true,
			settled: true,
		},
		{
			name:    "one role of two running",
			roles:   []string{"a", "b"},
			writes:  [][3]any{{0, lifecycle.Pending, lifecycle.Running}},
			want:    state{exp: "Running", expMsg: "a Running, b Pending", art: "Created"},
			changed: true,
			settled: true,
		},
		{
			name:    "a failed role with a live sibling is the expController's",
			roles:   []string{"a", "b"},
			before:  map[int][]lifecycle.Status{0: {lifecycle.Running}, 1: {lifecycle.Running}},
			writes:  [][3]any{{0, lifecycle.Running, lifecycle.Failed}},
			want:    state{exp: "Created", art: "Created"},
			changed: false,
		},
		{
			name:    "an abort ends with its last job",
			roles:   []string{"w"},
			abort:   true,
			writes:  [][3]any{{0, lifecycle.Aborting, lifecycle.Aborted}},
			want:    state{exp: "Aborted", expMsg: "wrong config", art: "Failed", artReason: "Aborted"},
			changed: true,
			settled: true,
		},
		{
			name:    "an experiment with a time-to-live is the expController's to watch",
			roles:   []string{"w"},
			ttl:     true,
			writes:  [][3]any{{0, lifecycle.Pending, lifecycle.Running}},
			want:    state{exp: "Running", expMsg: "w Running", art: "Created"},
			changed: true,
			settled: false,
		},
		{
			name:   "a new reason within a status is the expController's",
			roles:  []string{"w"},
			writes: [][3]any{{0, lifecycle.Pending, lifecycle.Pending}},
			want:   state{exp: "Created", art: "Created"},
			left:   true,
		},
	}
	for k, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exp, jobs, art := newExp(fmt.Sprintf("propagate-%d", k), tc.roles...)
			if tc.ttl {
				exp.TTL = time.Hour
			}
			mustCreate(t, e.s, exp, jobs, art)
			for i, path := range tc.before {
				from := lifecycle.Pending
				for _, to := range path {
					if _, err := e.s.UpdateJobStatus(ctx, store.StatusUpdate{ID: jobs[i].ID, Expected: from, Status: to}); err != nil {
						t.Fatal(err)
					}
					from = to
				}
			}
			if tc.abort {
				if _, _, err := e.s.AbortExp(ctx, exp.ID, "wrong config"); err != nil {
					t.Fatal(err)
				}
			}
			before, err := e.s.GetExp(ctx, exp.ID)
			if err != nil {
				t.Fatal(err)
			}
			var us []store.StatusUpdate
			for _, w := range tc.writes {
				u := store.StatusUpdate{ID: jobs[w[0].(int)].ID, Expected: w[1].(lifecycle.Status), Status: w[2].(lifecycle.Status)}
				switch u.Status {
				case lifecycle.Failed:
					u.Reason, u.Message = "JobFailed", "exit 3"
				case lifecycle.Pending:
					u.Reason, u.Message = "Waiting", "queue position 1"
				}
				us = append(us, u)
			}
			_, errs, exps, err := e.s.UpdateJobStatuses(ctx, us)
			if err != nil {
				t.Fatal(err)
			}
			for i, err := range errs {
				if err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
			}
			gotExp, err := e.s.GetExp(ctx, exp.ID)
			if err != nil {
				t.Fatal(err)
			}
			gotArt, err := e.s.GetArtifact(ctx, art.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := state{string(gotExp.Status), gotExp.Reason, gotExp.Message, string(gotArt.Status), gotArt.Reason}
			if got != tc.want {
				t.Errorf("after the batch: %+v, want %+v", got, tc.want)
			}
			if tc.left {
				if len(exps) != 0 {
					t.Fatalf("returned %+v, want nothing: no job's status moved", exps)
				}
				return
			}
			if len(exps) != 1 {
				t.Fatalf("returned %d experiments, want the one of the jobs written", len(exps))
			}
			c := exps[0]
			if c.Changed != tc.changed || c.Settled != tc.settled {
				t.Errorf("changed %t settled %t, want %t and %t", c.Changed, c.Settled, tc.changed, tc.settled)
			}
			if want := (store.ExpChange{ID: exp.ID, Name: exp.Name, ClusterName: gotExp.ClusterName, From: before.Status, Status: gotExp.Status,
				Reason: gotExp.Reason, Changed: c.Changed, Settled: c.Settled}); c != want {
				t.Errorf("returned %+v, want %+v", c, want)
			}
			// The same status again moves nothing: the experiment is not
			// looked at.
			last := us[len(us)-1]
			if lifecycle.JobMachine.IsTerminal(last.Status) {
				return // a terminal job takes no more writes
			}
			_, _, again, err := e.s.UpdateJobStatuses(ctx, []store.StatusUpdate{{ID: last.ID, Expected: last.Status, Status: last.Status, Reason: last.Reason, Message: last.Message}})
			if err != nil || len(again) != 0 {
				t.Errorf("the same write again: %+v (err %v), want no experiment looked at", again, err)
			}
		})
	}
}
