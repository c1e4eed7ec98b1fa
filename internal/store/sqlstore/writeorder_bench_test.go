package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

// BenchmarkSQLiteWriteOrder: 16 writers, each running small transactions
// back to back on one SQLite file, as the API server's handlers do under
// a dispatch burst. It reports the latency of a transaction, its wait for
// the single writer connection included, with the store's first-come-
// first-served order (fifo) and without it (pool: database/sql hands the
// freed connection to a random waiter), in the same run.
func BenchmarkSQLiteWriteOrder(b *testing.B) {
	for _, fifo := range []bool{true, false} {
		b.Run(map[bool]string{true: "fifo", false: "pool"}[fifo], func(b *testing.B) {
			ctx := context.Background()
			s := scratchStore(b)
			s.OrderWrites(fifo)
			const writers = 16
			var lat latencies
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := w; i < b.N*writers; i += writers {
						if !lat.time(b, func() error { return writeScratch(ctx, s, i) }) {
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(lat.pct(0.5), "tx-p50-ms")
			b.ReportMetric(lat.pct(0.99), "tx-p99-ms")
			b.ReportMetric(lat.pct(1), "tx-max-ms")
		})
	}
}

// BenchmarkSQLiteJobWritesUnderLoad: one job status writer among 8 other
// writers, all running transactions back to back on one SQLite file, as a
// burst of creates meets the resource manager's writes. Each job write is
// one row's update; each other write inserts 20 rows. It reports the job
// writes' latency, their wait for the writer included, and the others',
// with job writes going first (lanes) and with every write in one
// first-come-first-served lane (one-lane, as before), in the same run.
func BenchmarkSQLiteJobWritesUnderLoad(b *testing.B) {
	for _, oneLane := range []bool{false, true} {
		b.Run(map[bool]string{false: "lanes", true: "one-lane"}[oneLane], func(b *testing.B) {
			ctx := context.Background()
			s := scratchStore(b, "job")
			if oneLane {
				s.OneLane()
			}
			const others = 8
			var jobLat, otherLat latencies
			done := make(chan struct{})
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range others {
				wg.Go(func() {
					for i := w; ; i += others {
						select {
						case <-done:
							return
						default:
						}
						otherLat.time(b, func() error { return writeScratch(ctx, s, i) })
					}
				})
			}
			for i := 0; i < b.N; i++ {
				jobLat.time(b, func() error {
					return s.InJobTx(ctx, func(tx *sql.Tx) error {
						_, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO job (k, v) VALUES (?, ?)", i%100, fmt.Sprint(i))
						return err
					})
				})
			}
			close(done)
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(jobLat.pct(0.5), "job-tx-p50-ms")
			b.ReportMetric(jobLat.pct(0.99), "job-tx-p99-ms")
			b.ReportMetric(otherLat.pct(0.5), "other-tx-p50-ms")
			b.ReportMetric(otherLat.pct(0.99), "other-tx-p99-ms")
			b.ReportMetric(float64(len(otherLat.ms))/b.Elapsed().Seconds(), "other-tx/s")
		})
	}
}

// scratchStore is a SQLite store with a table "scratch", and a table of
// the same columns (k INTEGER PRIMARY KEY, v TEXT) for each name given.
func scratchStore(b *testing.B, tables ...string) *sqlstore.Store {
	ctx := context.Background()
	s := dbtest.NewSQLite(b)
	for _, name := range append([]string{"scratch"}, tables...) {
		if err := s.Exec(ctx, "CREATE TABLE "+name+" (k INTEGER PRIMARY KEY, v TEXT)"); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// writeScratch is writer i's transaction: 20 rows into scratch.
func writeScratch(ctx context.Context, s *sqlstore.Store, i int) error {
	return s.InTx(ctx, func(tx *sql.Tx) error {
		for k := range 20 {
			if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO scratch (k, v) VALUES (?, ?)", (i*20+k)%5000, fmt.Sprint(i)); err != nil {
				return err
			}
		}
		return nil
	})
}

// latencies collects how long calls took, in ms, from several writers.
type latencies struct {
	mu sync.Mutex
	ms []float64
}

// time runs run and notes how long it took; a failure fails b and is not
// noted, and time reports whether run succeeded.
func (l *latencies) time(b *testing.B, run func() error) bool {
	start := time.Now()
	if err := run(); err != nil {
		b.Error(err)
		return false
	}
	d := float64(time.Since(start).Microseconds()) / 1000
	l.mu.Lock()
	l.ms = append(l.ms, d)
	l.mu.Unlock()
	return true
}

// pct is the p-quantile of what was noted (1: the largest); call it once
// the writers are done.
func (l *latencies) pct(p float64) float64 {
	slices.Sort(l.ms)
	return l.ms[min(len(l.ms)-1, int(float64(len(l.ms))*p))]
}
