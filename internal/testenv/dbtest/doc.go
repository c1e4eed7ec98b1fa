// Package dbtest gives tests a real, empty, migrated Falcon database: a
// SQLite file in the test's temp dir, or a fresh database on the MariaDB
// server the development environment runs.
//
// Tests use the real engines rather than a fake because the behaviour worth
// testing (transactions, row locks, unique keys, affected-row counts) is the
// engine's. Each MySQL test gets its own randomly named database, dropped at
// cleanup, so parallel packages and reruns never see each other's rows.
//
// Without a reachable MariaDB, MySQL tests skip, except under CI=true, where
// a silently skipped backend would hide its failures: there they fail.
package dbtest
