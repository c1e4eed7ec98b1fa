package sqlstore_test

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

var backends = []struct {
	name string
	open opener
}{
	{"sqlite", dbtest.NewSQLite},
	{"mysql", dbtest.NewMySQL},
}

// BenchmarkCreateExp measures the write path the API server takes on every
// submission: one transaction with the experiment, two jobs and an artifact.
// "parallel" runs GOMAXPROCS*4 writers at once, which on SQLite queue for
// the single write connection.
func BenchmarkCreateExp(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			i := 0
			for b.Loop() {
				exp, jobs, art := newExp(fmt.Sprintf("bench-%d", i))
				i++
				if err := s.CreateExp(ctx, exp, jobs, art); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
		b.Run(be.name+"-parallel", func(b *testing.B) {
			s := be.open(b)
			var n atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					exp, jobs, art := newExp(fmt.Sprintf("bench-%d", n.Add(1)))
					if err := s.CreateExp(ctx, exp, jobs, art); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkListExps100k measures the list a user's `falcon exp list` runs,
// against 100,000 experiments (FALCON_BENCH_ROWS sets another count): the
// first page, filtered pages (each served by its (column, seq) index) and a
// page deep in the table, which keyset pagination makes as cheap as the
// first.
func BenchmarkListExps100k(b *testing.B) {
	if testing.Short() {
		b.Skip("seeds 100,000 rows")
	}
	// FALCON_BENCH_ROWS=1000000 measures the same lists at a million rows.
	rows := 100_000
	if v, err := strconv.Atoi(os.Getenv("FALCON_BENCH_ROWS")); err == nil && v >= 20_000 {
		rows = v
	}
	statuses := []lifecycle.Status{lifecycle.Created, lifecycle.Running, lifecycle.Succeeded, lifecycle.Failed, lifecycle.Aborted}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			start := time.Now()
			spec := map[string]store.TaskSpec{"trainer": {Command: "python train.py --epochs 10", Replica: 4, Image: "falcon/train:1"}}
			err := sqlstore.SeedExps(ctx, s, rows, func(i int) *store.Experiment {
				created := t0.Add(time.Duration(i) * time.Second)
				return &store.Experiment{
					ID: ids.New(ids.Experiment), Name: fmt.Sprintf("exp-%06d", i), ExpType: "train",
					ClusterName: fmt.Sprintf("cluster-%d", i%10), Tags: []string{"bench"}, Config: `{"lr": 0.1, "batch": 256}`,
					RoleToTaskSpec: spec, Status: statuses[i%len(statuses)], Creator: fmt.Sprintf("user-%d@example.com", i%100),
					CreatorID: fmt.Sprintf("u-%d", i%100), CreatedAt: created, UpdatedAt: created,
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("seeded %d experiments in %v", rows, time.Since(start).Round(time.Millisecond))

			cases := []struct {
				name string
				f    store.ExpFilter
			}{
				{"first-page", store.ExpFilter{}},
				{"status", store.ExpFilter{Status: lifecycle.Running}},                                  // 20% of rows
				{"creator", store.ExpFilter{Creator: "user-42@example.com"}},                            // 1%
				{"cluster+status", store.ExpFilter{ClusterName: "cluster-3", Status: lifecycle.Failed}}, // 10%, no composite index
				{"deep-page", store.ExpFilter{Page: store.Page{Token: sqlstore.PageToken(1000)}}},       // rows 999..950
				{"deep-page-creator", store.ExpFilter{Creator: "user-42@example.com", Page: store.Page{Token: sqlstore.PageToken(10_000)}}},
			}
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					for b.Loop() {
						items, _, err := s.ListExps(ctx, c.f)
						if err != nil {
							b.Fatal(err)
						}
						if len(items) != 50 {
							b.Fatalf("got %d items, want 50", len(items))
						}
					}
				})
			}
		})
	}
}

// BenchmarkUpdateJobStatuses measures the write the resource manager makes
// for every status change it records (a queue position, a dispatch, a
// job's end): one transaction of 1 or 10 conditional updates, each with
// its event, over 200 live jobs. Its cost is what a slot's handover waits
// for behind the writes queued ahead of it.
func BenchmarkUpdateJobStatuses(b *testing.B) {
	for _, be := range backends {
		for _, size := range []int{1, 10} {
			b.Run(fmt.Sprintf("%s/batch-%d", be.name, size), func(b *testing.B) {
				s := be.open(b)
				var jobs []string
				for i := range 100 {
					exp, js, art := newExp(fmt.Sprintf("upd-%d", i))
					if err := s.CreateExp(ctx, exp, js, art); err != nil {
						b.Fatal(err)
					}
					for _, j := range js {
						jobs = append(jobs, j.ID)
					}
				}
				n := 0
				for b.Loop() {
					us := make([]store.StatusUpdate, size)
					for k := range us {
						us[k] = store.StatusUpdate{ID: jobs[(n*size+k)%len(jobs)], Expected: lifecycle.Pending,
							Status: lifecycle.Pending, Reason: string(lifecycle.ReasonWaiting), Message: "position " + strconv.Itoa(n)}
					}
					n++
					_, errs, _, err := s.UpdateJobStatuses(ctx, us)
					if err != nil {
						b.Fatal(err)
					}
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "updates/s")
			})
		}
	}
}
