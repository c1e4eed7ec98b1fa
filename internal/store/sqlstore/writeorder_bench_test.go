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
