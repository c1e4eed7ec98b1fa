package sqlstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

// A list narrowed by a key (experiment IDs, experiments' jobs) reads the
// rows the key finds; its other filters only filter. Without the hint
// SQLite's planner takes the (status, seq) index for its order and reads
// every experiment that ever had the status, to find the few asked for.
func TestSQLiteListsUseTheirKey(t *testing.T) {
	ctx := context.Background()
	ids := []string{"a", "b", "c"}
	for _, c := range []struct {
		name      string
		table     string
		filter    any
		keyed     bool // the store's hint on
		use, skip string
	}{
		{"experiments by ID and status", "experiments", store.ExpFilter{IDs: ids, Status: lifecycle.Succeeded}, true,
			"sqlite_autoindex_experiments", "experiments_status_seq"},
		{"experiments by ID, cluster and creator", "experiments", store.ExpFilter{IDs: ids, ClusterName: "c", Creator: "u"}, true,
			"sqlite_autoindex_experiments", "_seq"},
		{"a user's own experiments (exp list --creator me) by their index", "experiments", store.ExpFilter{CreatorID: "local:alice"}, true,
			"experiments_creator_id_seq", "experiments_status_seq"},
		{"experiments by status alone keep its index", "experiments", store.ExpFilter{Status: lifecycle.Succeeded}, true,
			"experiments_status_seq", "autoindex"},
		{"jobs of experiments by status", "jobs", store.JobFilter{ExpIDs: ids, Statuses: []lifecycle.Status{lifecycle.Running}}, true,
			"jobs_exp_id", "_seq"},
		{"jobs of an experiment by cluster", "jobs", store.JobFilter{ExpID: "a", ClusterName: "c"}, true,
			"jobs_exp_id", "_seq"},
		{"jobs by cluster and status keep their index", "jobs", store.JobFilter{ClusterName: "c", Statuses: []lifecycle.Status{lifecycle.Running}}, true,
			"jobs_cluster_name_status_seq", "jobs_exp_id"},
		// What the hint prevents.
		{"without the hint", "experiments", store.ExpFilter{IDs: ids, Status: lifecycle.Succeeded}, false,
			"experiments_status_seq", "autoindex"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := dbtest.NewSQLite(t)
			s.KeyLists(c.keyed)
			plan, err := s.ListPlan(ctx, c.table, c.filter)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, c.use) || strings.Contains(plan, c.skip) {
				t.Errorf("plan:\n%s\nwant it to use %s and not %s", plan, c.use, c.skip)
			}
		})
	}
}

// BenchmarkSQLiteListByIDs: a caller polls for a few of its experiments
// by ID and status, among 2,000 that succeeded, with the store's hint
// (keyed) and without it (scan: the planner reads every Succeeded row).
func BenchmarkSQLiteListByIDs(b *testing.B) {
	for _, keyed := range []bool{true, false} {
		b.Run(map[bool]string{true: "keyed", false: "scan"}[keyed], func(b *testing.B) {
			ctx := context.Background()
			s := dbtest.NewSQLite(b)
			s.KeyLists(keyed)
			var poll []string
			for i := range 2000 {
				exp, jobs, art := newExp(fmt.Sprintf("exp-%d", i), "main")
				if err := s.CreateExp(ctx, exp, jobs, art); err != nil {
					b.Fatal(err)
				}
				if i%100 == 0 {
					poll = append(poll, exp.ID) // left Pending: not found
					continue
				}
				if err := s.Exec(ctx, "UPDATE experiments SET status = 'Succeeded' WHERE id = ?", exp.ID); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				got, _, err := s.ListExps(ctx, store.ExpFilter{IDs: poll, Status: lifecycle.Succeeded, Page: store.Page{Size: 100}})
				if err != nil || len(got) != 0 {
					b.Fatalf("got %d, %v", len(got), err)
				}
			}
		})
	}
}
