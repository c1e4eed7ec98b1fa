package sqlstore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/falconhq/falcon/internal/store"
)

// PageToken is the token that continues a list after the row with seq.
func PageToken(seq int64) string { return encodeToken(seq) }

// MigrateTo applies the embedded migrations up to version v, so a test can
// put rows in an older schema and watch a later migration convert them.
func (s *Store) MigrateTo(ctx context.Context, v int64) error {
	p, err := s.migrations()
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, v)
	return err
}

// Dialect names the database behind the store: "mysql" or "sqlite".
func (s *Store) Dialect() string { return s.d.name }

// Exec runs a statement on the write pool, to set up what the store's own
// methods would never write.
func (s *Store) Exec(ctx context.Context, q string, args ...any) error {
	_, err := s.wdb.ExecContext(ctx, q, args...)
	return err
}

// CreateExpAtSchema6 writes an experiment as the store did at schema 6,
// before experiments had metric_specs, for tests of older migrations.
func (s *Store) CreateExpAtSchema6(ctx context.Context, exp *store.Experiment, jobs []*store.Job, art *store.Artifact) error {
	if err := s.prepareCreate(exp, jobs, art); err != nil {
		return err
	}
	cols, _, _ := strings.Cut(expInsertCols, ", metric_specs")
	args := s.expArgs(exp)
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, insertSQL("experiments", cols), args[:strings.Count(cols, ",")+1]...); err != nil {
			return err
		}
		// Jobs as schema 6 had them: without what later migrations added
		// (selection, migration 16).
		jcols, _, _ := strings.Cut(jobInsertCols, ", selection")
		for _, j := range jobs {
			if _, err := tx.ExecContext(ctx, insertSQL("jobs", jcols), s.jobArgs(j)[:strings.Count(jcols, ",")+1]...); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, insertSQL("artifacts", artInsertCols), s.artArgs(art)...)
		return err
	})
}

// PreparedStmts counts the statements the store keeps prepared (stmtCache).
func (s *Store) PreparedStmts() int {
	if s.stmts == nil {
		return 0
	}
	s.stmts.mu.Lock()
	defer s.stmts.mu.Unlock()
	return len(s.stmts.ready)
}

// PreparedReads counts the statements the read pool keeps prepared
// (prepDB).
func (s *Store) PreparedReads() int {
	if s.reads.c == nil {
		return 0
	}
	s.reads.c.mu.Lock()
	defer s.reads.c.mu.Unlock()
	return len(s.reads.c.ready)
}

// InTx runs fn as the store runs its own transactions.
func (s *Store) InTx(ctx context.Context, fn func(tx *sql.Tx) error) error { return s.inTx(ctx, fn) }

// InJobTx runs fn as the store runs a job status write.
func (s *Store) InJobTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.inJobTx(ctx, fn)
}

// TurnWaiting is how many transactions wait for their turn (Store.turn).
func (s *Store) TurnWaiting() int { return s.turn.waiting() }

// OrderWrites turns the ordering of SQLite's transactions (Store.turn) on
// or off, for the benchmark that measures it.
func (s *Store) OrderWrites(on bool) {
	if on {
		s.turn = newTurnstile()
	} else {
		s.turn = nil
	}
}

// OneLane puts every transaction in one first-come-first-served lane, as
// before job writes went first, for the benchmark that compares the two.
func (s *Store) OneLane() { s.turn.oneLane = true }

// MaxJobStreak is how many job writes in a row take the writer while
// another write waits.
const MaxJobStreak = maxJobStreak

// ListPlan is how the database would run ListExps (table "experiments")
// or ListJobs (table "jobs") for f: SQLite's EXPLAIN QUERY PLAN, one step
// per line.
func (s *Store) ListPlan(ctx context.Context, table string, f any) (string, error) {
	var c conds
	cols := expCols
	switch f := f.(type) {
	case store.ExpFilter:
		var err error
		if c, err = s.expConds(f); err != nil {
			return "", err
		}
	case store.JobFilter:
		c, cols = s.jobConds(f), jobCols
	}
	q, args := pageQuery(table, cols, c, 100, 0, table == "experiments")
	rows, err := s.rdb.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return "", err
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "\n"), rows.Err()
}

// KeyLists turns off (false) the hint that lets a list narrowed by a key
// use it (dialect.keyed): the baseline of BenchmarkSQLiteListByIDs.
func (s *Store) KeyLists(on bool) {
	if !on {
		s.d.filterOnly = ""
	}
}

// HideEvent removes one event row, as if the write that numbered it had
// not committed yet.
func (s *Store) HideEvent(ctx context.Context, expID string, seq int64) error {
	_, err := s.wdb.ExecContext(ctx, "DELETE FROM exp_events WHERE exp_id = ? AND seq = ?", expID, seq)
	return err
}
