package lifecycle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func job(id, role string, s Status, reason, msg string) Entity {
	return Entity{ID: id, Role: role, Status: s, Reason: reason, Message: msg}
}

var (
	t1 = time.Date(2026, 12, 8, 1, 0, 0, 0, time.UTC)
	t2 = t1.Add(time.Minute)
)

func started(j Entity, at time.Time) Entity {
	j.StartedAt = at
	return j
}

func ended(j Entity, at time.Time) Entity {
	j.FinishedAt = at
	return j
}

func TestPropagate(t *testing.T) {
	art := &Entity{ID: "art-1", Status: Created}
	tests := []struct {
		name string
		exp  Entity
		jobs []Entity
		art  *Entity
		want Plan
	}{
		{
			name: "waiting job is mirrored on a created experiment",
			exp:  Entity{ID: "exp-1", Status: Created},
			jobs: []Entity{job("job-1", "worker", Pending, "Waiting", "queue position #1")},
			art:  art,
			want: Plan{Exp: []Update{{ID: "exp-1", From: Created, To: Created, Reason: "Waiting", Message: "queue position #1"}}},
		},
		{
			name: "already mirrored is a no-op",
			exp:  Entity{ID: "exp-1", Status: Created, Reason: "Waiting", Message: "queue position #1"},
			jobs: []Entity{job("job-1", "worker", Pending, "Waiting", "queue position #1")},
			art:  art,
			want: Plan{},
		},
		{
			name: "a job at the pool cap is further along than a waiting one, not as far as a provisioning one",
			exp:  Entity{ID: "exp-1", Status: Created},
			jobs: []Entity{job("job-1", "a", Pending, "Waiting", "queue position #1"), job("job-2", "b", Pending, "WaitingForPool", "at the cap")},
			art:  art,
			want: Plan{Exp: []Update{{ID: "exp-1", From: Created, To: Created, Reason: "WaitingForPool", Message: "role b: at the cap"}}},
		},
		{
			name: "a provisioning job is further along than one at the pool cap",
			exp:  Entity{ID: "exp-1", Status: Created},
			jobs: []Entity{job("job-1", "a", Pending, "WaitingForPool", "at the cap"), job("job-2", "b", Pending, "Provisioning", "creating")},
			art:  art,
			want: Plan{Exp: []Update{{ID: "exp-1", From: Created, To: Created, Reason: "Provisioning", Message: "role b: creating"}}},
		},
		{
			name: "running job makes the experiment running",
			exp:  Entity{ID: "exp-1", Status: Created},
			jobs: []Entity{job("job-1", "worker", Running, "", "")},
			art:  art,
			want: Plan{Exp: []Update{{ID: "exp-1", From: Created, To: Running, Message: "worker Running"}}},
		},
		{
			name: "all succeeded: artifact then experiment through Running",
			exp:  Entity{ID: "exp-1", Status: Created},
			jobs: []Entity{job("job-1", "a", Succeeded, "", ""), job("job-2", "b", Succeeded, "", "")},
			art:  art,
			want: Plan{
				Artifact: &Update{ID: "art-1", From: Created, To: Succeeded},
				Exp: []Update{
					{ID: "exp-1", From: Created, To: Running},
					{ID: "exp-1", From: Running, To: Succeeded},
				},
			},
		},
		{
			name: "one role failed: siblings aborted, experiment waits",
			exp:  Entity{ID: "exp-1", Status: Running},
			jobs: []Entity{
				job("job-1", "a", Failed, "JobFailed", "rank 0 exited with code 3"),
				job("job-2", "b", Running, "", ""),
				job("job-3", "c", Pending, "Waiting", "queue position #2"),
			},
			art: art,
			want: Plan{
				AbortJobs: []Update{
					{ID: "job-2", From: Running, To: Aborting, Message: "stopped because role a failed"},
					{ID: "job-3", From: Pending, To: Aborting, Message: "stopped because role a failed"},
				},
				Exp: []Update{{ID: "exp-1", From: Running, To: Running, Message: "role a failed; stopping the other roles"}},
			},
		},
		{
			name: "failed role and aborted siblings: experiment fails with the role's reason",
			exp:  Entity{ID: "exp-1", Status: Running, Message: "role a failed; stopping the other roles"},
			jobs: []Entity{
				job("job-1", "a", Failed, "Timeout", "timed out after 5s"),
				job("job-2", "b", Aborted, "", "stopped because role a failed"),
			},
			art: art,
			want: Plan{
				Artifact: &Update{ID: "art-1", From: Created, To: Failed, Reason: "Timeout", Message: "role a: timed out after 5s"},
				Exp:      []Update{{ID: "exp-1", From: Running, To: Failed, Reason: "Timeout", Message: "role a: timed out after 5s"}},
			},
		},
		{
			// Role b was aborted on its own; role a, sorting first, was only
			// stopped because of it and must not be blamed.
			name: "role aborted on its own: experiment fails naming that role",
			exp:  Entity{ID: "exp-1", Status: Running},
			jobs: []Entity{
				job("job-1", "a", Aborted, "", "stopped because role b failed"),
				job("job-2", "b", Aborted, "", "aborted"),
			},
			art: art,
			want: Plan{
				Artifact: &Update{ID: "art-1", From: Created, To: Failed, Reason: "RoleFailed", Message: "role b was aborted"},
				Exp:      []Update{{ID: "exp-1", From: Running, To: Failed, Reason: "RoleFailed", Message: "role b was aborted"}},
			},
		},
		{
			name: "failure before running goes Created -> Failed",
			exp:  Entity{ID: "exp-1", Status: Created},
			jobs: []Entity{job("job-1", "w", Failed, "JobSubmitFailed", "boom")},
			art:  art,
			want: Plan{
				Artifact: &Update{ID: "art-1", From: Created, To: Failed, Reason: "JobSubmitFailed", Message: "role w: boom"},
				Exp:      []Update{{ID: "exp-1", From: Created, To: Failed, Reason: "JobSubmitFailed", Message: "role w: boom"}},
			},
		},
		{
			name: "aborting waits for jobs",
			exp:  Entity{ID: "exp-1", Status: Aborting, Message: "user abort"},
			jobs: []Entity{job("job-1", "w", Aborting, "", "")},
			art:  art,
			want: Plan{},
		},
		{
			name: "aborting with all jobs terminal becomes aborted",
			exp:  Entity{ID: "exp-1", Status: Aborting, Message: "user abort"},
			jobs: []Entity{job("job-1", "w", Aborted, "", ""), job("job-2", "x", Succeeded, "", "")},
			art:  art,
			want: Plan{
				Artifact: &Update{ID: "art-1", From: Created, To: Failed, Reason: "Aborted", Message: abortedArtifactMessage},
				Exp:      []Update{{ID: "exp-1", From: Aborting, To: Aborted, Message: "user abort"}},
			},
		},
		{
			name: "terminal experiment with open artifact closes it (crash between updates)",
			exp:  Entity{ID: "exp-1", Status: Succeeded},
			jobs: []Entity{job("job-1", "w", Succeeded, "", "")},
			art:  art,
			want: Plan{Artifact: &Update{ID: "art-1", From: Created, To: Succeeded}},
		},
		{
			name: "terminal experiment with closed artifact is a no-op",
			exp:  Entity{ID: "exp-1", Status: Failed, Reason: "JobFailed"},
			jobs: []Entity{job("job-1", "w", Failed, "JobFailed", "x")},
			art:  &Entity{ID: "art-1", Status: Failed},
			want: Plan{},
		},
		{
			name: "an experiment that succeeds ended when its last job did",
			exp:  Entity{ID: "exp-1", Status: Running},
			jobs: []Entity{ended(job("job-1", "a", Succeeded, "", ""), t1), ended(job("job-2", "b", Succeeded, "", ""), t2)},
			want: Plan{Exp: []Update{{ID: "exp-1", From: Running, To: Succeeded, FinishedAt: t2}}},
		},
		{
			name: "one that fails, too",
			exp:  Entity{ID: "exp-1", Status: Running},
			jobs: []Entity{ended(job("job-1", "a", Failed, "JobFailed", "x"), t2), ended(job("job-2", "b", Aborted, "", SiblingStopMessage("a")), t1)},
			want: Plan{Exp: []Update{{ID: "exp-1", From: Running, To: Failed, Reason: "JobFailed", Message: "role a: x", FinishedAt: t2}}},
		},
		{
			name: "and an abort: when its last job stopped",
			exp:  Entity{ID: "exp-1", Status: Aborting},
			jobs: []Entity{ended(job("job-1", "a", Aborted, "", ""), t1)},
			want: Plan{Exp: []Update{{ID: "exp-1", From: Aborting, To: Aborted, Message: "aborted by user", FinishedAt: t1}}},
		},
		{
			name: "an experiment that runs began when its first job did",
			exp:  Entity{ID: "exp-1", Status: Created},
			jobs: []Entity{started(job("job-1", "a", Running, "", ""), t2), started(job("job-2", "b", Running, "", ""), t1), job("job-3", "c", Pending, "Waiting", "q")},
			want: Plan{Exp: []Update{{ID: "exp-1", From: Created, To: Running, Message: "a Running, b Running, c Pending", StartedAt: t1}}},
		},
		{
			name: "one that succeeds at once, too",
			exp:  Entity{ID: "exp-1", Status: Created},
			jobs: []Entity{ended(started(job("job-1", "a", Succeeded, "", ""), t1), t2)},
			want: Plan{Exp: []Update{{ID: "exp-1", From: Created, To: Running, StartedAt: t1}, {ID: "exp-1", From: Running, To: Succeeded, FinishedAt: t2}}},
		},
		{
			name: "a job's end unknown: the time of the write",
			exp:  Entity{ID: "exp-1", Status: Created},
			jobs: []Entity{ended(job("job-1", "a", Succeeded, "", ""), t1), job("job-2", "b", Succeeded, "", "")},
			want: Plan{Exp: []Update{{ID: "exp-1", From: Created, To: Running}, {ID: "exp-1", From: Running, To: Succeeded}}},
		},
		{
			name: "running experiment with a waiting second role stays running",
			exp:  Entity{ID: "exp-1", Status: Running, Message: "a Succeeded, b Pending"},
			jobs: []Entity{job("job-1", "a", Succeeded, "", ""), job("job-2", "b", Pending, "Waiting", "q")},
			art:  art,
			want: Plan{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Propagate(tt.exp, tt.jobs, tt.art)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Propagate (-want +got):\n%s", diff)
			}
			for _, u := range append(append([]Update{}, got.AbortJobs...), got.Exp...) {
				m := JobMachine
				if u.ID == tt.exp.ID {
					m = ExperimentMachine
				}
				if err := m.Check(u.From, u.To); err != nil {
					t.Errorf("plan contains illegal step: %v", err)
				}
			}
		})
	}
}

// Applying a plan and propagating again must converge to an empty plan:
// that is what lets the controller crash anywhere and resume.
func TestPropagateConverges(t *testing.T) {
	exp := Entity{ID: "exp-1", Status: Created}
	jobs := []Entity{job("job-1", "a", Failed, "JobFailed", "x"), job("job-2", "b", Running, "", "")}
	art := &Entity{ID: "art-1", Status: Created}
	for i := 0; i < 5; i++ {
		p := Propagate(exp, jobs, art)
		if p.Empty() {
			if exp.Status != Failed || art.Status != Failed {
				t.Fatalf("converged to exp=%s art=%s, want Failed/Failed", exp.Status, art.Status)
			}
			return
		}
		for _, u := range p.AbortJobs {
			for k := range jobs {
				if jobs[k].ID == u.ID {
					// the resource manager finishes the abort
					jobs[k].Status, jobs[k].Reason, jobs[k].Message = Aborted, u.Reason, u.Message
				}
			}
		}
		if p.Artifact != nil {
			art.Status = p.Artifact.To
		}
		for _, u := range p.Exp {
			exp.Status, exp.Reason, exp.Message = u.To, u.Reason, u.Message
		}
	}
	t.Fatal("propagation did not converge in 5 rounds")
}
