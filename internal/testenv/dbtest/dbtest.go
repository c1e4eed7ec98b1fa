package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/falconhq/falcon/internal/store/sqlstore"
)

// DefaultMySQLDSN is the development MariaDB; FALCON_TEST_MYSQL_DSN
// overrides it. Its database only serves to connect: tests create their own.
const DefaultMySQLDSN = "root@tcp(127.0.0.1:3306)/test?parseTime=true"

// MySQLDSN creates an empty database with a random name on the test server
// and returns a DSN for it. The database is dropped when tb ends.
func MySQLDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv("FALCON_TEST_MYSQL_DSN")
	if dsn == "" {
		dsn = DefaultMySQLDSN
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatalf("FALCON_TEST_MYSQL_DSN: %v", err)
	}
	cfg.Timeout = 5 * time.Second
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		tb.Fatalf("open MySQL: %v", err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		unavailable(tb, "MySQL at %s is unreachable: %v", cfg.Addr, err)
	}

	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "falcon_test_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		tb.Fatalf("create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		// A fresh connection: admin is closed by now.
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			tb.Errorf("drop database %s: %v", name, err)
			return
		}
		defer db.Close()
		if _, err := db.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// unavailable skips tb, or fails it under CI.
func unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf(format+" (CI=true: failing instead of skipping)", args...)
	}
	tb.Skipf(format+" (set FALCON_TEST_MYSQL_DSN, or run MariaDB on 127.0.0.1:3306)", args...)
}

// NewMySQL returns a migrated store on a fresh MySQL database.
func NewMySQL(tb testing.TB, opts ...sqlstore.Option) *sqlstore.Store {
	tb.Helper()
	return open(tb, "mysql", MySQLDSN(tb), opts)
}

// NewSQLite returns a migrated store on a new SQLite file in tb's temp dir.
func NewSQLite(tb testing.TB, opts ...sqlstore.Option) *sqlstore.Store {
	tb.Helper()
	return open(tb, "sqlite", sqlstore.SQLiteDSN(filepath.Join(tb.TempDir(), "falcon.db")), opts)
}

func open(tb testing.TB, driver, dsn string, opts []sqlstore.Option) *sqlstore.Store {
	tb.Helper()
	ctx := context.Background()
	// Migration chatter would drown test output; callers can pass their own.
	opts = append([]sqlstore.Option{sqlstore.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	s, err := sqlstore.Open(ctx, driver, dsn, opts...)
	if err != nil {
		tb.Fatalf("open %s store: %v", driver, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close %s store: %v", driver, err)
		}
	})
	if err := s.Migrate(ctx); err != nil {
		tb.Fatalf("migrate %s store: %v", driver, err)
	}
	return s
}
