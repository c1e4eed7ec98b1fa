package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

// Two Store instances on one database, as two server replicas have: each
// lists the events the other wrote, never its own.
func TestOtherWrites(t *testing.T) {
	for _, tc := range []struct {
		driver string
		dsn    func(t testing.TB) string
	}{
		{"sqlite", func(t testing.TB) string { return sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "falcon.db")) }},
		{"mysql", dbtest.MySQLDSN},
	} {
		t.Run(tc.driver, func(t *testing.T) {
			t.Parallel()
			dsn := tc.dsn(t)
			open := func() *sqlstore.Store {
				s, err := sqlstore.Open(ctx, tc.driver, dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				if err := s.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
				return s
			}
			a, b := open(), open()
			start := time.Now().Add(-time.Second)
			// Created now, as the API server stamps them: a creation's
			// events carry the creation time.
			now := func(exp *store.Experiment, jobs []*store.Job) {
				exp.CreatedAt = time.Now().UTC()
				for _, j := range jobs {
					j.CreatedAt = exp.CreatedAt
				}
			}
			expA, jobsA, artA := newExp("by-a", "main")
			now(expA, jobsA)
			mustCreate(t, a, expA, jobsA, artA)
			expB, jobsB, artB := newExp("by-b", "main")
			now(expB, jobsB)
			mustCreate(t, b, expB, jobsB, artB)
			if _, err := b.UpdateJobStatus(context.Background(), store.StatusUpdate{ID: jobsB[0].ID, Expected: lifecycle.Pending,
				Status: lifecycle.Pending, Reason: "Waiting", Message: "queue position #1"}); err != nil {
				t.Fatal(err)
			}
			exps := func(refs []store.EventRef) map[string]int {
				out := map[string]int{}
				for i, r := range refs {
					out[r.ExpID]++
					if i > 0 && r.Time.Before(refs[i-1].Time) {
						t.Errorf("not oldest first: %v after %v", r.Time, refs[i-1].Time)
					}
				}
				return out
			}
			seenByA, err := a.OtherWrites(ctx, start, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := exps(seenByA); got[expB.ID] < 2 || got[expA.ID] != 0 {
				t.Errorf("a sees %v: want b's creation and update, none of its own", got)
			}
			seenByB, err := b.OtherWrites(ctx, start, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := exps(seenByB); got[expA.ID] == 0 || got[expB.ID] != 0 {
				t.Errorf("b sees %v: want a's creation only", got)
			}
			if later, err := a.OtherWrites(ctx, time.Now().Add(time.Minute), 0); err != nil || len(later) != 0 {
				t.Errorf("since a minute ahead: %v %v, want nothing", later, err)
			}
			if one, err := a.OtherWrites(ctx, start, 1); err != nil || len(one) != 1 {
				t.Errorf("limit 1: %d events, %v", len(one), err)
			}
		})
	}
}
