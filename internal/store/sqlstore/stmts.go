package sqlstore

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps prepared statements for the queries transactions run
// again and again (a status update's conditional UPDATE, its row read and
// its event insert), so that SQLite parses each once per connection rather
// than on every call: parsing was a third of a status update's cost in
// BenchmarkUpdateJobStatuses. A second cache does the same for the read
// pool's queries (prepDB): the controllers' lists by IDs, run on every
// cycle, spent about 7% of falcon dev's CPU in SQLite's parser. Only
// SQLite uses them. On MySQL the driver
// interpolates arguments (one round trip per query, no server-side
// statement), and a prepared statement would be prepared again on each of
// the pool's connections.
//
// A statement cannot be prepared from inside a transaction for use after
// it: on SQLite the only write connection is the transaction's. So a query
// seen often enough is prepared after the transaction ends (prepareSeen),
// on the pool, and later transactions bind it (sql.Tx.StmtContext), which
// reuses the connection's prepared statement.
type stmtCache struct {
	db *sql.DB

	mu    sync.Mutex
	ready map[string]*sql.Stmt
	seen  map[string]int // queries run unprepared, and how often
	due   []string       // seen prepareAfter times, to prepare
}

const (
	// maxStmts bounds the statements kept. Queries whose text grows with
	// their input (an IN list, a multi-row INSERT) come in a variant per
	// length; the common lengths fit, and the rest run unprepared.
	maxStmts = 256
	// prepareAfter is how often a query runs unprepared before it is
	// prepared: a variant seen once is not worth a statement.
	prepareAfter = 2
)

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, ready: map[string]*sql.Stmt{}, seen: map[string]int{}}
}

// lookup returns q's prepared statement, or nil (counting the use) when it
// has none yet. A nil cache has none.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.ready[q]; st != nil {
		return st
	}
	if len(c.ready) < maxStmts {
		if len(c.seen) >= 4*maxStmts {
			clear(c.seen) // variants that never came back
		}
		if c.seen[q]++; c.seen[q] == prepareAfter {
			c.due = append(c.due, q)
		}
	}
	return nil
}

// prepareSeen prepares the queries run prepareAfter times, outside any
// transaction of the caller's. A query that fails to prepare is forgotten
// and runs unprepared as before.
func (c *stmtCache) prepareSeen(ctx context.Context) {
	if c == nil {
		return
	}
	c.mu.Lock()
	due := c.due
	c.due = nil
	for _, q := range due {
		delete(c.seen, q)
	}
	c.mu.Unlock()
	for _, q := range due {
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.ready[q] == nil && len(c.ready) < maxStmts {
			c.ready[q], st = st, nil
		}
		c.mu.Unlock()
		if st != nil {
			_ = st.Close()
		}
	}
}

// close closes the statements kept.
func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.ready {
		_ = st.Close()
		delete(c.ready, q)
	}
}

// prepTx runs a transaction's queries through the cache's statements where
// it has them; it is a querier, so the functions of a status update take
// it in place of the *sql.Tx.
type prepTx struct {
	*sql.Tx
	c *stmtCache
}

func (s *Store) prep(tx *sql.Tx) prepTx { return prepTx{tx, s.stmts} }

func (p prepTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := p.c.lookup(q); st != nil {
		return p.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return p.Tx.ExecContext(ctx, q, args...)
}

func (p prepTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := p.c.lookup(q); st != nil {
		return p.Tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return p.Tx.QueryContext(ctx, q, args...)
}

func (p prepTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := p.c.lookup(q); st != nil {
		return p.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return p.Tx.QueryRowContext(ctx, q, args...)
}

// prepDB runs single-statement reads through the cache's statements: a
// read outside any transaction can be prepared at once, on the read pool
// itself, so a query is prepared on its second run and bound from its
// third. On MySQL the cache is nil and every read goes straight through.
type prepDB struct {
	*sql.DB
	c *stmtCache
}

// stmt returns q's statement, preparing those due first.
func (p prepDB) stmt(ctx context.Context, q string) *sql.Stmt {
	if st := p.c.lookup(q); st != nil {
		return st
	}
	p.c.prepareSeen(ctx)
	return nil
}

func (p prepDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := p.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.DB.QueryContext(ctx, q, args...)
}

func (p prepDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := p.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.DB.QueryRowContext(ctx, q, args...)
}
