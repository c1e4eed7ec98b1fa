package sqlstore_test

import (
	"strconv"
	"testing"

	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

// Status updates on SQLite run on prepared statements once their queries
// have come back: the set of statements stops growing after the first few
// updates, every update still lands under its precondition, and a refused
// one is still refused.
func TestStatusUpdatesReusePreparedStatements(t *testing.T) {
	s := dbtest.NewSQLite(t)
	exp, jobs, art := newExp("prepared")
	if err := s.CreateExp(ctx, exp, jobs, art); err != nil {
		t.Fatal(err)
	}
	update := func(i int) {
		t.Helper()
		msg := "position " + strconv.Itoa(i)
		got, errs, _, err := s.UpdateJobStatuses(ctx, []store.StatusUpdate{{ID: jobs[0].ID, Expected: lifecycle.Pending,
			Status: lifecycle.Pending, Reason: string(lifecycle.ReasonWaiting), Message: msg}})
		if err != nil || errs[0] != nil {
			t.Fatalf("update %d: %v %v", i, err, errs[0])
		}
		if got[0].Message != msg {
			t.Fatalf("update %d wrote %q, want %q", i, got[0].Message, msg)
		}
	}
	for i := range 3 {
		update(i)
	}
	n := s.PreparedStmts()
	if n == 0 {
		t.Fatal("no statement prepared after three identical updates")
	}
	for i := 3; i < 20; i++ {
		update(i)
	}
	if got := s.PreparedStmts(); got != n {
		t.Fatalf("%d statements prepared after 20 updates, %d after 3: the same queries were prepared again", got, n)
	}
	_, errs, _, err := s.UpdateJobStatuses(ctx, []store.StatusUpdate{{ID: jobs[0].ID, Expected: lifecycle.Running,
		Status: lifecycle.Succeeded}})
	if err != nil || errs[0] == nil {
		t.Fatalf("an update expecting Running of a Pending job: %v, %v; want it refused", err, errs[0])
	}
	if j, err := s.GetJob(ctx, jobs[0].ID); err != nil || j.Status != lifecycle.Pending || j.Message != "position 19" {
		t.Fatalf("job after the refused update: %+v, %v", j, err)
	}
}
