package leader

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
)

// MySQL elects a leader with a named GET_LOCK on MySQL or MariaDB. The lock
// belongs to one connection, taken out of db's pool for the term and
// discarded after it, so it never lingers in a pooled connection.
type MySQL struct {
	db   *sql.DB
	name string
	o    options
}

var _ Elector = (*MySQL)(nil)

// maxLockName is the server's limit on GET_LOCK names.
const maxLockName = 64

// NewMySQL returns an elector on the lock called name. Lock names are
// global to the server, not per database: replicas of one deployment
// share a name, deployments sharing a server need different ones. It uses
// the timing, clock and logger options.
func NewMySQL(db *sql.DB, name string, opts ...Option) (*MySQL, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if name == "" || len(name) > maxLockName {
		return nil, fmt.Errorf("lock name %q must have 1 to %d characters", name, maxLockName)
	}
	return &MySQL{db: db, name: name, o: o}, nil
}

// Run campaigns until ctx is done; see Elector.
//
// One cycle:
//  1. take a connection from the pool and shorten its wait_timeout to the
//     lease duration, so the server frees the lock of a leader that went
//     silent (a vanished machine) after that long;
//  2. wait up to RetryPeriod in GET_LOCK, which returns the moment the
//     holder's connection closes; repeat until it is granted or ctx ends,
//     pausing RetryPeriod after an error;
//  3. wait RenewDeadline before leading: a lock can be freed while its
//     holder still runs (the server killed the connection, or the database
//     failed over), and RenewDeadline is the longest that holder takes to
//     notice, so the terms never overlap;
//  4. run lead and, every RetryPeriod, check IS_USED_LOCK = CONNECTION_ID()
//     on the same connection: that both proves the lock is ours and keeps
//     the connection from idling out. A failed check, or none successful
//     for RenewDeadline, cancels lead's context;
//  5. once lead has returned, RELEASE_LOCK and discard the connection.
func (m *MySQL) Run(ctx context.Context, lead func(context.Context)) error {
	for {
		conn, err := m.acquire(ctx)
		if err != nil {
			return nil // ctx is done: a standby just stops
		}
		m.hold(ctx, conn, lead)
		if ctx.Err() != nil {
			return nil
		}
	}
}

// acquire returns a connection holding the lock, or ctx's error.
func (m *MySQL) acquire(ctx context.Context) (*sql.Conn, error) {
	wait := m.o.timing.RetryPeriod.Seconds()
	for {
		conn, err := m.db.Conn(ctx)
		if err == nil {
			// wait_timeout takes whole seconds; Validate made sure it is.
			_, err = conn.ExecContext(ctx, fmt.Sprintf("SET SESSION wait_timeout = %d", int(m.o.timing.LeaseDuration/time.Second)))
		}
		for err == nil {
			var got sql.NullInt64
			if err = conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", m.name, wait).Scan(&got); err != nil {
				break
			}
			switch {
			case got.Valid && got.Int64 == 1:
				m.o.log.Info("leader election: acquired the lock", "lock", m.name)
				return conn, nil
			case !got.Valid:
				err = errors.New("GET_LOCK returned NULL")
			}
			// 0: someone holds it and did not let go within the wait; the
			// wait itself paced us, so ask again at once.
		}
		if conn != nil {
			discard(conn)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		m.o.log.Warn("leader election: cannot campaign on MySQL; retrying", "lock", m.name, "err", err, "retry", m.o.timing.RetryPeriod)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.o.clock.After(m.o.timing.RetryPeriod):
		}
	}
}

// hold runs lead while conn holds the lock, then releases it.
func (m *MySQL) hold(ctx context.Context, conn *sql.Conn, lead func(context.Context)) {
	defer discard(conn)
	// Not a child of ctx: a graceful stop drains with the lock still held.
	held, lose := context.WithCancelCause(context.WithoutCancel(ctx))
	defer lose(nil)
	select {
	case <-ctx.Done():
		m.release(conn)
		return
	case <-m.o.clock.After(m.o.timing.RenewDeadline):
	}
	sent := m.o.clock.Now()
	if err := m.check(held, conn); err != nil {
		m.o.log.Warn("leader election: lost the lock before leading", "lock", m.name, "err", err)
		return
	}
	lastOK := sent
	m.o.log.Info("leader election: leading", "lock", m.name)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(held)
	}()
	for held.Err() == nil {
		select {
		case <-done:
			m.release(conn)
			return
		case <-m.o.clock.After(m.o.timing.RetryPeriod):
		}
		sent := m.o.clock.Now()
		err := m.check(held, conn)
		switch {
		case err != nil:
			m.o.log.Warn("leader election: lost the lock", "lock", m.name, "err", err)
			lose(ErrLost)
		case sent.Sub(lastOK) > m.o.timing.RenewDeadline:
			// The check worked but came too late: the server may already
			// have dropped the connection as idle; do not trust it.
			m.o.log.Warn("leader election: lock check overdue; stepping down", "lock", m.name, "since", sent.Sub(lastOK))
			lose(ErrLost)
		default:
			// The server heard from us no earlier than sent, so it keeps
			// the connection until at least sent + LeaseDuration.
			lastOK = sent
		}
	}
	<-done
}

// check proves the lock is still this connection's. It must answer within
// RenewDeadline - RetryPeriod so a leader learns of trouble before the
// server may hand the lock on; a query cut by the timeout closes the
// connection, which frees the lock as well.
func (m *MySQL) check(ctx context.Context, conn *sql.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, m.o.timing.RenewDeadline-m.o.timing.RetryPeriod)
	defer cancel()
	var mine sql.NullBool
	if err := conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", m.name).Scan(&mine); err != nil {
		return err
	}
	if !mine.Valid || !mine.Bool {
		return errors.New("the lock is no longer held by this connection")
	}
	return nil
}

// release gives the lock up so a standby's waiting GET_LOCK returns now,
// not when the connection's close reaches the server.
func (m *MySQL) release(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), m.o.timing.RenewDeadline)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", m.name); err != nil {
		m.o.log.Warn("leader election: release the lock", "lock", m.name, "err", err)
		return
	}
	m.o.log.Info("leader election: released the lock", "lock", m.name)
}

// discard closes conn's underlying connection instead of returning it to
// the pool, where it could keep the lock (or the short wait_timeout) for a
// later, unrelated user.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
