// Package sqlstore implements store.Store over database/sql for two
// dialects: MySQL (MariaDB) for a shared deployment, and SQLite (the pure-Go
// modernc driver, no cgo) so that a laptop or a test runs the very same
// queries with nothing to install.
//
// One implementation serves both because Falcon's invariants live in the SQL,
// not in the database: every status change is a conditional UPDATE guarded
// by the status the caller read (so a stale controller cannot overwrite a
// user's abort), and every multi-row change (create, abort, delete) is one
// transaction. The dialects differ only in a few clauses (row locks, insert-
// if-absent, time encoding), kept in dialect.go, and the test suite runs
// unchanged against both.
//
// SQLite serialises writers per database file. Rather than let concurrent
// goroutines collide and wait on SQLITE_BUSY, the store sends every write
// through a pool of one connection and serves reads from a separate pool,
// which WAL lets run alongside the writer. The writes queue in Go
// (turnstile): job status writes first, so that a queue's handover or a
// run's end does not wait behind a burst of creates, and within each lane
// first come, first served.
//
// Lists page by an internal auto-increment seq (keyset pagination) and never
// by OFFSET, so the thousandth page costs what the first does.
package sqlstore
