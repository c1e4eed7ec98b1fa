package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

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
			s := dbtest.NewSQLite(b)
			if err := s.Exec(ctx, "CREATE TABLE scratch (k INTEGER PRIMARY KEY, v TEXT)"); err != nil {
				b.Fatal(err)
			}
			s.OrderWrites(fifo)
			const writers = 16
			var mu sync.Mutex
			var lat []float64
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := w; i < b.N*writers; i += writers {
						start := time.Now()
						err := s.InTx(ctx, func(tx *sql.Tx) error {
							for k := range 20 {
								if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO scratch (k, v) VALUES (?, ?)", (i*20+k)%5000, fmt.Sprint(i)); err != nil {
									return err
								}
							}
							return nil
						})
						if err != nil {
							b.Error(err)
							return
						}
						d := time.Since(start)
						mu.Lock()
						lat = append(lat, float64(d.Microseconds())/1000)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(lat)
			pct := func(p float64) float64 { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
			b.ReportMetric(pct(0.5), "tx-p50-ms")
			b.ReportMetric(pct(0.99), "tx-p99-ms")
			b.ReportMetric(lat[len(lat)-1], "tx-max-ms")
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
			s := dbtest.NewSQLite(b)
			if err := s.Exec(ctx, "CREATE TABLE scratch (k INTEGER PRIMARY KEY, v TEXT)"); err != nil {
				b.Fatal(err)
			}
			if err := s.Exec(ctx, "CREATE TABLE job (k INTEGER PRIMARY KEY, v TEXT)"); err != nil {
				b.Fatal(err)
			}
			if oneLane {
				s.OneLane()
			}
			const others = 8
			var mu sync.Mutex
			var jobLat, otherLat []float64
			timed := func(into *[]float64, run func() error) {
				start := time.Now()
				if err := run(); err != nil {
					b.Error(err)
					return
				}
				d := float64(time.Since(start).Microseconds()) / 1000
				mu.Lock()
				*into = append(*into, d)
				mu.Unlock()
			}
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
						timed(&otherLat, func() error {
							return s.InTx(ctx, func(tx *sql.Tx) error {
								for k := range 20 {
									if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO scratch (k, v) VALUES (?, ?)", (i*20+k)%5000, fmt.Sprint(i)); err != nil {
										return err
									}
								}
								return nil
							})
						})
					}
				})
			}
			for i := 0; i < b.N; i++ {
				timed(&jobLat, func() error {
					return s.InJobTx(ctx, func(tx *sql.Tx) error {
						_, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO job (k, v) VALUES (?, ?)", i%100, fmt.Sprint(i))
						return err
					})
				})
			}
			close(done)
			wg.Wait()
			b.StopTimer()
			pct := func(lat []float64, p float64) float64 {
				slices.Sort(lat)
				return lat[min(len(lat)-1, int(float64(len(lat))*p))]
			}
			b.ReportMetric(pct(jobLat, 0.5), "job-tx-p50-ms")
			b.ReportMetric(pct(jobLat, 0.99), "job-tx-p99-ms")
			b.ReportMetric(pct(otherLat, 0.5), "other-tx-p50-ms")
			b.ReportMetric(pct(otherLat, 0.99), "other-tx-p99-ms")
			b.ReportMetric(float64(len(otherLat))/b.Elapsed().Seconds(), "other-tx/s")
		})
	}
}
