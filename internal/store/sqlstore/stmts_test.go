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

// Reads on SQLite run on prepared statements from their third run: the
// controllers' lists by IDs and a get each prepare one statement, which
// later calls reuse, and what they read stays what was written.
func TestReadsReusePreparedStatements(t *testing.T) {
	s := dbtest.NewSQLite(t)
	exp, jobs, art := newExp("prepared-reads")
	if err := s.CreateExp(ctx, exp, jobs, art); err != nil {
		t.Fatal(err)
	}
	read := func() {
		t.Helper()
		got, _, err := s.ListJobs(ctx, store.JobFilter{ExpIDs: []string{exp.ID}, Page: store.Page{Size: 100}})
		if err != nil || len(got) != len(jobs) {
			t.Fatalf("ListJobs: %d jobs, %v; want %d", len(got), err, len(jobs))
		}
		e, err := s.GetExp(ctx, exp.ID)
		if err != nil || e.Name != exp.Name {
			t.Fatalf("GetExp: %+v, %v", e, err)
		}
	}
	for range 3 {
		read()
	}
	n := s.PreparedReads()
	if n < 2 {
		t.Fatalf("%d read statements prepared after three identical reads of two kinds, want at least 2", n)
	}
	for range 20 {
		read()
	}
	if got := s.PreparedReads(); got != n {
		t.Fatalf("%d read statements prepared after 23 reads, %d after 3: the same queries were prepared again", got, n)
	}
	// A write between reads is seen: a statement does not cache rows.
	if _, err := s.UpdateJobStatus(ctx, store.StatusUpdate{ID: jobs[0].ID, Expected: lifecycle.Pending, Status: lifecycle.Running}); err != nil {
		t.Fatal(err)
	}
	if j, err := s.GetJob(ctx, jobs[0].ID); err != nil || j.Status != lifecycle.Running {
		t.Fatalf("job after the write: %+v, %v", j, err)
	}
}
