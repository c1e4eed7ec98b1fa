package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// dialect is everything that differs between MySQL and SQLite. Queries are
// otherwise shared: both use ? placeholders and the same schema names.
type dialect struct {
	name  string // directory under migrations/
	goose goose.Dialect
	// forUpdate locks the rows a transaction reads before changing them.
	// SQLite needs none: an immediate transaction already holds the
	// database's single write lock.
	forUpdate string
	// userIfAbsent ends an INSERT INTO users so that it does nothing when
	// the user_id exists; see EnsureUser.
	userIfAbsent string
	// filterOnly prefixes a column in a condition that must filter the
	// rows a more selective key found rather than choose the index: see
	// keyed.
	filterOnly string
}

var (
	mysqlDialect = dialect{
		name:      "mysql",
		goose:     goose.DialectMySQL,
		forUpdate: " FOR UPDATE",
		// Not INSERT IGNORE: IGNORE also turns strict-mode errors (a value
		// too long, say) into warnings and stores truncated data.
		userIfAbsent: " ON DUPLICATE KEY UPDATE user_id = user_id",
	}
	sqliteDialect = dialect{
		name:         "sqlite",
		goose:        goose.DialectSQLite3,
		userIfAbsent: " ON CONFLICT (user_id) DO NOTHING",
		// SQLite's documented way to keep a term from using an index.
		filterOnly: "+",
	}
)

func (d dialect) isMySQL() bool { return d.name == "mysql" }

// keyed returns how a list names its other filter columns when a key
// narrows it to a few rows already (experiment IDs, an experiment's jobs).
// Without statistics SQLite's planner prefers an index that also gives
// the list's order, such as (status, seq), and would read every
// experiment that ever succeeded to find the three a caller polls for;
// those columns then only filter. MySQL's planner, which keeps
// statistics, picks the key by itself (checked with EXPLAIN on MariaDB).
func (d dialect) keyed(narrowed bool) func(col string) string {
	return func(col string) string {
		if narrowed {
			return d.filterOnly + col
		}
		return col
	}
}

// sqliteTimeLayout is how SQLite stores timestamps: UTC, fixed width (so
// text order is time order) and microseconds, the precision MySQL's
// DATETIME(6) keeps, so both backends return identical values.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

// normTime is the form of every timestamp the store writes and returns.
func normTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func normTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	n := normTime(*t)
	return &n
}

// timeArg encodes t as a query argument.
func (d dialect) timeArg(t time.Time) any {
	t = normTime(t)
	if d.isMySQL() {
		return t
	}
	return t.Format(sqliteTimeLayout)
}

func (d dialect) timePtrArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return d.timeArg(*t)
}

// openMySQL opens a pool with the connection settings the store depends on,
// whatever dsn says: times parsed into UTC, utf8mb4, and parameters
// interpolated client-side (one round trip per query instead of three for
// prepare, execute and close).
func openMySQL(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	if !strings.HasPrefix(cfg.Collation, "utf8mb4") {
		cfg.Collation = "utf8mb4_general_ci"
	}
	if _, ok := cfg.Params["optimizer_switch"]; !ok {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		// With two list filters (cluster and status, say) MariaDB likes to
		// intersect both (col, seq) indexes and then sort every match:
		// 88 ms at 100k rows instead of 1 ms for walking one index in seq
		// order and stopping at the page size. See BenchmarkListExps100k.
		cfg.Params["optimizer_switch"] = "'index_merge_intersection=off'"
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	// Below MySQL's default wait_timeout, so the pool retires a connection
	// before the server drops it.
	db.SetConnMaxLifetime(5 * time.Minute)
	return db, nil
}

// sqliteReadConns bounds concurrent readers. Reads are short; more
// connections than cores buys nothing.
const sqliteReadConns = 4

// sqliteDefaults are the per-connection settings the store relies on, added
// to a DSN unless it sets them itself. WAL lets readers run during a write;
// foreign keys are off by default in SQLite; busy_timeout makes another
// process's writer wait rather than fail; synchronous=NORMAL is safe with
// WAL (a power cut may lose the last commits, never corrupt the file) and
// saves an fsync per commit; _txlock=immediate takes the write lock at
// BEGIN, so a transaction that reads and then writes cannot fail midway
// with SQLITE_BUSY when another connection wrote in between.
var sqliteDefaults = []struct {
	pragma, value string   // _pragma=pragma(value)
	alias         []string // driver shorthand keys that set the same thing
}{
	{"busy_timeout", "10000", []string{"_busy_timeout", "_timeout"}},
	{"foreign_keys", "1", []string{"_foreign_keys", "_fk"}},
	{"journal_mode", "WAL", []string{"_journal_mode", "_journal"}},
	{"synchronous", "NORMAL", []string{"_synchronous", "_sync"}},
}

// SQLiteDSN returns the DSN for a SQLite database file at path, with the
// settings the store needs spelled out. Open adds them to any DSN anyway;
// this saves callers from knowing the URI syntax.
func SQLiteDSN(path string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return withSQLiteDefaults("file:" + esc)
}

// withSQLiteDefaults appends each default that dsn does not set.
func withSQLiteDefaults(dsn string) string {
	base, rawQuery, _ := strings.Cut(dsn, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		q = url.Values{} // let the driver report the malformed query
	}
	set := map[string]bool{}
	for _, p := range q["_pragma"] {
		name, _, _ := strings.Cut(p, "(")
		name, _, _ = strings.Cut(name, "=")
		set[strings.ToLower(strings.TrimSpace(name))] = true
	}
	var add []string
	for _, d := range sqliteDefaults {
		if set[d.pragma] {
			continue
		}
		aliased := false
		for _, a := range d.alias {
			aliased = aliased || q.Has(a)
		}
		if !aliased {
			add = append(add, fmt.Sprintf("_pragma=%s(%s)", d.pragma, d.value))
		}
	}
	if !q.Has("_txlock") {
		add = append(add, "_txlock=immediate")
	}
	if len(add) == 0 {
		return dsn
	}
	if rawQuery != "" {
		add = append([]string{rawQuery}, add...)
	}
	return base + "?" + strings.Join(add, "&")
}

func sqliteInMemory(dsn string) bool {
	return strings.Contains(dsn, ":memory:") || strings.Contains(dsn, "mode=memory")
}

// openSQLite opens the write pool (one connection) and the read pool. An
// in-memory database exists per connection, so it gets one pool for both.
func openSQLite(ctx context.Context, dsn string) (w, r *sql.DB, err error) {
	dsn = withSQLiteDefaults(dsn)
	w, err = sql.Open("sqlite", dsn)
	if err != nil {
		return nil, nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if sqliteInMemory(dsn) {
		return w, w, nil
	}
	// Open the writer first so that it, not a reader, switches the file to
	// WAL; query_only then guards the read pool against a stray write that
	// would bypass the writer queue.
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return nil, nil, err
	}
	r, err = sql.Open("sqlite", dsn+"&_pragma=query_only(1)")
	if err != nil {
		_ = w.Close()
		return nil, nil, err
	}
	r.SetMaxOpenConns(sqliteReadConns)
	r.SetMaxIdleConns(sqliteReadConns)
	r.SetConnMaxLifetime(0)
	return w, r, nil
}
