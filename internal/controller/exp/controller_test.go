package exp_test

import (
	"context"
	"testing"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	expctl "github.com/falconhq/falcon/internal/controller/exp"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

func move(t *testing.T, env *apitest.Env, id, from, to, reason, msg string) {
	t.Helper()
	if _, err := env.Jobs.UpdateJobStatus(context.Background(), &falconv1.UpdateJobStatusRequest{
		Id: id, ExpectedStatus: from, Status: to, Reason: reason, Message: msg}); err != nil {
		t.Fatal(err)
	}
}

func reconcile(t *testing.T, c *expctl.Controller) {
	t.Helper()
	if err := c.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestPropagatesThroughTheAPI(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	c := expctl.New(env.Conn)
	exp := env.Create(t, "two", map[string]*falconv1.TaskSpec{
		"a": {Command: "x", Replica: 1}, "b": {Command: "y", Replica: 2},
	})
	a, b := exp.GetJobs()[0].GetId(), exp.GetJobs()[1].GetId()

	move(t, env, a, "Pending", "Running", "", "")
	reconcile(t, c)
	if got := env.Exp(t, exp.GetId()); got.GetStatus() != "Running" || got.GetStartedAt() == nil {
		t.Fatalf("one job running: exp %s started_at %v", got.GetStatus(), got.GetStartedAt())
	}

	move(t, env, a, "Running", "Failed", "JobFailed", "rank 0 exited with code 3")
	reconcile(t, c)
	got := env.Exp(t, exp.GetId())
	if got.GetStatus() != "Running" {
		t.Fatalf("exp %s while the sibling is being stopped, want Running", got.GetStatus())
	}
	if j := env.Job(t, b); j.GetStatus() != "Aborting" || j.GetReason() != "" || j.GetMessage() != "stopped because role a failed" {
		t.Fatalf("sibling %s/%q %q, want Aborting, no reason, a message naming role a", j.GetStatus(), j.GetReason(), j.GetMessage())
	}

	move(t, env, b, "Aborting", "Aborted", "", "stopped because role a failed")
	reconcile(t, c)
	got = env.Exp(t, exp.GetId())
	if got.GetStatus() != "Failed" || got.GetReason() != "JobFailed" || got.GetArtifact().GetStatus() != "Failed" || got.GetFinishedAt() == nil {
		t.Fatalf("exp %s/%s artifact %s, want Failed/JobFailed with artifact Failed", got.GetStatus(), got.GetReason(), got.GetArtifact().GetStatus())
	}
	v := got.GetVersion()
	reconcile(t, c) // reentrant: a second pass changes nothing
	if again := env.Exp(t, exp.GetId()); again.GetVersion() != v {
		t.Fatalf("second reconcile rewrote the experiment (version %d -> %d)", v, again.GetVersion())
	}
}

func TestAbortedExperimentClosesItsArtifact(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	c := expctl.New(env.Conn)
	exp := env.Create(t, "ab", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	if _, err := env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp.GetId()}); err != nil {
		t.Fatal(err)
	}
	reconcile(t, c)
	if got := env.Exp(t, exp.GetId()); got.GetStatus() != "Aborting" {
		t.Fatalf("exp %s before its job is aborted, want Aborting", got.GetStatus())
	}
	move(t, env, exp.GetJobs()[0].GetId(), "Aborting", "Aborted", "", "")
	reconcile(t, c)
	got := env.Exp(t, exp.GetId())
	if got.GetStatus() != "Aborted" || got.GetAbortedAt() == nil || got.GetArtifact().GetStatus() != "Failed" || got.GetArtifact().GetReason() != "Aborted" {
		t.Fatalf("exp %s aborted_at %v artifact %s/%s", got.GetStatus(), got.GetAbortedAt(), got.GetArtifact().GetStatus(), got.GetArtifact().GetReason())
	}
}

func TestAllSucceeded(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	c := expctl.New(env.Conn)
	exp := env.Create(t, "ok", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	j := exp.GetJobs()[0].GetId()
	move(t, env, j, "Pending", "Running", "", "")
	move(t, env, j, "Running", "Succeeded", "", "")
	reconcile(t, c) // Created -> Running -> Succeeded in one pass
	got := env.Exp(t, exp.GetId())
	if got.GetStatus() != "Succeeded" || got.GetArtifact().GetStatus() != "Succeeded" {
		t.Fatalf("exp %s artifact %s", got.GetStatus(), got.GetArtifact().GetStatus())
	}
}
