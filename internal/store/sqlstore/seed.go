package sqlstore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/falconhq/falcon/internal/store"
)

// SeedExps inserts n experiments made by mk, in multi-row INSERTs inside one
// transaction, so benchmarks and load tests can fill a table with 100,000
// rows in seconds (CreateExp, one transaction per experiment, would take
// minutes). It writes experiments only: no jobs, no artifacts, so mk should
// make finished experiments unless the caller wants controllers to see them.
func SeedExps(ctx context.Context, s *Store, n int, mk func(i int) *store.Experiment) error {
	const batch = 500 // 500 rows x 21 columns stays under SQLite's 32766 variables
	row := placeholders(numCols(expInsertCols))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for i := 0; i < n; i += batch {
			m := min(batch, n-i)
			args := make([]any, 0, m*numCols(expInsertCols))
			for k := range m {
				e := mk(i + k)
				e.Version = 1
				args = append(args, s.expArgs(e)...)
			}
			rows := strings.TrimSuffix(strings.Repeat(row+", ", m), ", ")
			if _, err := tx.ExecContext(ctx, "INSERT INTO experiments ("+expInsertCols+") VALUES "+rows, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Fresh statistics, as a long-running database has: InnoDB refreshes
	// them in the background at some point after a bulk load, and plans
	// change when it does. Measure the plans production will get.
	analyze := "ANALYZE"
	if s.d.isMySQL() {
		analyze = "ANALYZE TABLE experiments"
	}
	rows, err := s.wdb.QueryContext(ctx, analyze) // MySQL returns a result set
	if err != nil {
		return err
	}
	return rows.Close()
}
