package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
)

// migrations holds one directory of goose migrations per dialect. They are
// compiled in so a falcon binary can bring any database up to date without
// shipping files next to it.
//
//go:embed migrations/mysql/*.sql migrations/sqlite/*.sql
var migrations embed.FS

var _ store.Store = (*Store)(nil)

// Store is a store.Store backed by MySQL or SQLite. It is safe for
// concurrent use.
type Store struct {
	d dialect
	// wdb runs every transaction and every write. On SQLite it holds a
	// single connection, so writers queue in Go instead of spinning on
	// SQLITE_BUSY; on MySQL it is the only pool and rdb is the same *sql.DB.
	wdb *sql.DB
	// rdb serves single-statement reads. On SQLite it is a separate pool of
	// query-only connections that WAL lets read while the writer writes.
	rdb *sql.DB
	// reads runs them, through prepared statements on SQLite (prepDB).
	reads prepDB
	now   func() time.Time
	log   *slog.Logger
	// writer names this Store instance on the events it writes, so that
	// another instance on the same database (a server replica) can tell
	// the writes it did not make (OtherWrites).
	writer string
	// stmts holds the prepared statements of hot transaction queries
	// (SQLite only; nil on MySQL, see stmtCache).
	stmts *stmtCache
	// turn hands SQLite's one writer to a transaction at a time, job
	// writes first (turnstile); nil on MySQL, whose writers run side by
	// side.
	turn *turnstile
	// observeTx, if set, is told each transaction attempt's lane, wait
	// and run (WithTxObserver).
	observeTx func(lane string, wait, run time.Duration)
}

// Option configures a Store.
type Option func(*options)

type options struct {
	clock     func() time.Time
	logger    *slog.Logger
	observeTx func(lane string, wait, run time.Duration)
}

// WithClock sets where every timestamp the store writes comes from, so tests
// can assert exact times instead of sleeping. The default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.clock = now }
}

// WithLogger sets the logger for migrations and transaction retries. The
// default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithTxObserver has every transaction's attempt report how long it waited
// until its BEGIN returned (its turn for SQLite's one writer; on MySQL a
// connection from the pool and the BEGIN's round trip) and how long it then
// ran until it committed or rolled back: the figures that show writers
// queueing on a busy database. lane is "jobs" for a job status write,
// which takes SQLite's writer ahead of the others, and "other" for the
// rest. An attempt that never began reports nothing.
func WithTxObserver(observe func(lane string, wait, run time.Duration)) Option {
	return func(o *options) { o.observeTx = observe }
}

// Open connects to a database. driver is "mysql" (dsn in the
// go-sql-driver/mysql format, e.g. "user@tcp(host:3306)/falcon") or
// "sqlite" (dsn a path or file: URI; see SQLiteDSN). Settings the store
// relies on (parseTime and UTC for MySQL; WAL, foreign keys, a busy timeout
// and immediate transactions for SQLite) are added to dsn when missing.
//
// Open does not create tables: call Migrate.
func Open(ctx context.Context, driver, dsn string, opts ...Option) (*Store, error) {
	o := options{
		clock:  func() time.Time { return time.Now().UTC() },
		logger: slog.Default(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Store{now: func() time.Time { return normTime(o.clock()) }, log: o.logger, writer: newWriterID(), observeTx: o.observeTx}

	var err error
	switch driver {
	case "mysql":
		s.d = mysqlDialect
		s.wdb, err = openMySQL(dsn)
		s.rdb = s.wdb
	case "sqlite":
		s.d = sqliteDialect
		s.wdb, s.rdb, err = openSQLite(ctx, dsn)
		s.stmts = newStmtCache(s.wdb)
		s.reads.c = newStmtCache(s.rdb)
		s.turn = newTurnstile()
	default:
		return nil, errdefs.Invalid("driver", "must be mysql or sqlite, got %q", driver)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: open %s: %w", driver, err)
	}
	s.reads.DB = s.rdb
	for _, db := range []*sql.DB{s.wdb, s.rdb} {
		if err := db.PingContext(ctx); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("sqlstore: connect to %s: %w: %w", driver, errdefs.ErrUnavailable, err)
		}
	}
	return s, nil
}

// Close closes both connection pools.
func (s *Store) Close() error {
	s.stmts.close()
	s.reads.c.close()
	err := s.wdb.Close()
	if s.rdb != s.wdb {
		err = errors.Join(err, s.rdb.Close())
	}
	return err
}

// Migrate applies every embedded migration the database has not seen yet.
// It is safe to call on every start, and on MySQL from several replicas at
// once: they take turns on a named lock.
func (s *Store) Migrate(ctx context.Context) error {
	p, err := s.migrations()
	if err != nil {
		return err
	}
	if s.d.isMySQL() {
		unlock, err := s.lockMigrations(ctx)
		if err != nil {
			return err
		}
		defer unlock()
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("sqlstore: migrate: %w", err)
	}
	return nil
}

// SchemaVersion is the newest migration applied to the database, what
// `falcon migrate` reports.
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	p, err := s.migrations()
	if err != nil {
		return 0, err
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: schema version: %w", err)
	}
	return v, nil
}

func (s *Store) migrations() (*goose.Provider, error) {
	fsys, err := fs.Sub(migrations, "migrations/"+s.d.name)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: migrations: %w", err)
	}
	p, err := goose.NewProvider(s.d.goose, s.wdb, fsys,
		goose.WithSlog(s.log),
		// Only our embedded files: a Go migration registered globally by
		// some other package must never run against Falcon's schema.
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: migrations: %w", err)
	}
	// No p.Close(): it would close s.wdb.
	return p, nil
}

// lockMigrations takes a MySQL user-level lock named after the database, so
// replicas starting together do not run the same DDL twice. The lock lives
// as long as the session, hence the dedicated connection.
func (s *Store) lockMigrations(ctx context.Context) (unlock func(), err error) {
	const name = "CONCAT('falcon_migrate_', MD5(DATABASE()))" // lock names are limited to 64 characters
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: migration lock: %w", err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK("+name+", 600)").Scan(&got); err != nil || got.Int64 != 1 {
		_ = conn.Close()
		return nil, fmt.Errorf("sqlstore: migration lock not acquired (result %v): %w", got, err)
	}
	return func() {
		var released sql.NullInt64
		_ = conn.QueryRowContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK("+name+")").Scan(&released)
		_ = conn.Close()
	}, nil
}

// maxTxAttempts bounds retries of a transaction that MySQL chose as a
// deadlock victim. Deadlocks are rare here (every transaction touches one
// experiment's rows in the same order) but InnoDB's gap locks can still pair
// two inserts; the victim has been rolled back, so running it again is safe.
const maxTxAttempts = 3

// inTx runs fn in a transaction on the write pool, committing when fn
// returns nil. fn may run more than once, so it must not have effects
// outside tx besides setting its results.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.inLaneTx(ctx, laneOther, fn)
}

// inJobTx is inTx for a job status write, which takes SQLite's writer
// ahead of the others (turnstile).
func (s *Store) inJobTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.inLaneTx(ctx, laneJobs, fn)
}

func (s *Store) inLaneTx(ctx context.Context, l lane, fn func(tx *sql.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.tryTx(ctx, l, fn)
		if err == nil || attempt == maxTxAttempts || !isDeadlock(err) {
			// Outside the transaction now, so the write connection is
			// free to prepare what it ran often (stmtCache).
			s.stmts.prepareSeen(ctx)
			return err
		}
		s.log.DebugContext(ctx, "sqlstore: retrying deadlocked transaction", "attempt", attempt, "err", err)
	}
}

func (s *Store) tryTx(ctx context.Context, l lane, fn func(tx *sql.Tx) error) (err error) {
	asked := time.Now()
	var begun time.Time
	if s.observeTx != nil {
		defer func() {
			if !begun.IsZero() {
				s.observeTx(l.String(), begun.Sub(asked), time.Since(begun))
			}
		}()
	}
	if turn := s.turn; turn != nil {
		if err := turn.acquire(ctx, l); err != nil {
			return fmt.Errorf("sqlstore: begin: %w", err)
		}
		defer turn.release()
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: begin: %w", err)
	}
	begun = time.Now()
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: commit: %w", err)
	}
	return nil
}

// querier is what reads need from a *sql.DB or a *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}
