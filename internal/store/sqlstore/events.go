package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

// How events stay in order. Every transaction that records an event of an
// experiment first holds the experiment's row lock (lockExps; a locking
// read on MySQL, the single writer on SQLite), takes its numbers from
// experiments.last_event_seq under that lock and commits them with the
// change. Numbers of one experiment therefore commit in the order they are
// given, with no gaps, and a watcher that has read up to seq N finds every
// later event at N+1 and above. The lock comes before any job row's, the
// order AbortExp already takes, so the two never deadlock.

const eventCols = "exp_id, seq, at, kind, entity_id, status, reason, message, detail"

// maxEventList bounds one ListEvents call.
const maxEventList = 1000

// AppendEvents implements store.Store.
func (s *Store) AppendEvents(ctx context.Context, events []store.Event) error {
	if len(events) == 0 {
		return nil
	}
	for i, e := range events {
		if e.ExpID == "" || e.EntityID == "" || (e.Kind != store.EventExperiment && e.Kind != store.EventJob) {
			return errdefs.Invalid("events", "event %d: exp_id, entity_id and a kind of %q or %q are required",
				i, store.EventExperiment, store.EventJob)
		}
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.lockExps(ctx, tx, expIDsOf(events)); err != nil {
			return err
		}
		return s.appendEvents(ctx, tx, events)
	})
}

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	limit := f.Limit
	if limit <= 0 || limit > maxEventList {
		limit = maxEventList
	}
	// A reader must never step past an event still being committed, or a
	// watcher resuming after the last seq it saw would miss it for good.
	// MariaDB can show a transaction's events before those of an earlier
	// one that held the experiment's row lock first (seen under load in
	// testEventsCommitInOrder). Seqs are taken under that lock, and a write
	// rolled back gives its seq back, so a gap between two events read is
	// one being committed; so is a gap right after AfterSeq while that
	// event is still kept, the oldest being the ones dropped. The page
	// stops before such a gap: the write that fills it wakes the reader.
	rows, err := s.reads.QueryContext(ctx, "SELECT "+eventCols+" FROM exp_events WHERE exp_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
		f.ExpID, f.AfterSeq, limit+1)
	if err != nil {
		return nil, dbErr("list events", err)
	}
	defer rows.Close()
	var out []store.Event
	prev, contiguous := f.AfterSeq, false
	for rows.Next() {
		var e store.Event
		if err := rows.Scan(&e.ExpID, &e.Seq, timeCol{&e.Time}, &e.Kind, &e.EntityID, &e.Status, &e.Reason, &e.Message, jsonCol{&e.Detail}); err != nil {
			return nil, dbErr("list events", err)
		}
		if f.AfterSeq > 0 && e.Seq == f.AfterSeq {
			contiguous = true // the one asked after is kept: what follows it must
			continue
		}
		if (contiguous || len(out) > 0) && e.Seq != prev+1 {
			break
		}
		if len(out) == limit {
			break
		}
		if len(e.Detail) == 0 {
			e.Detail = nil
		}
		out = append(out, e)
		prev = e.Seq
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list events", err)
	}
	return out, nil
}

func expIDsOf(events []store.Event) []string {
	var ids []string
	for _, e := range events {
		ids = append(ids, e.ExpID)
	}
	return ids
}

// lockExps takes the row locks of the experiments, in ID order so that two
// transactions locking several never wait on each other in a cycle. An
// experiment that does not exist is skipped: the write that follows reports
// it. SQLite needs nothing: the transaction holds the database's one write
// lock from BEGIN.
func (s *Store) lockExps(ctx context.Context, tx *sql.Tx, ids []string) error {
	if s.d.forUpdate == "" || len(ids) == 0 {
		return nil
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var c conds
	c.in("id", ids)
	rows, err := tx.QueryContext(ctx, "SELECT id FROM experiments"+c.sql()+" ORDER BY id"+s.d.forUpdate, c.args...)
	if err != nil {
		return dbErr("lock experiments", err)
	}
	defer rows.Close()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return dbErr("lock experiments", err)
	}
	return nil
}

// lockJobsExps takes the row locks of the experiments the jobs belong to
// (see lockExps), in one statement: the subquery on jobs is a plain read
// (a locking clause does not reach into it), which cannot be stale since
// a job's exp_id never changes.
func (s *Store) lockJobsExps(ctx context.Context, tx *sql.Tx, jobIDs []string) error {
	db := s.prep(tx)
	if s.d.forUpdate == "" || len(jobIDs) == 0 {
		return nil
	}
	var c conds
	c.in("id", slices.Compact(slices.Sorted(slices.Values(jobIDs))))
	rows, err := db.QueryContext(ctx, "SELECT id FROM experiments WHERE id IN (SELECT exp_id FROM jobs"+c.sql()+") ORDER BY id"+s.d.forUpdate, c.args...)
	if err != nil {
		return dbErr("lock experiments", err)
	}
	defer rows.Close()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return dbErr("lock experiments", err)
	}
	return nil
}

// appendEvents numbers and writes events inside tx, whose caller holds the
// row locks of their experiments, and drops each experiment's events beyond
// the newest MaxEventsPerExp. Events keep their order within an experiment.
func (s *Store) appendEvents(ctx context.Context, tx *sql.Tx, events []store.Event) error {
	if len(events) == 0 {
		return nil
	}
	var order []string
	byExp := map[string][]store.Event{}
	for _, e := range events {
		if _, ok := byExp[e.ExpID]; !ok {
			order = append(order, e.ExpID)
		}
		byExp[e.ExpID] = append(byExp[e.ExpID], e)
	}
	now := s.now()
	for _, expID := range order {
		evs := byExp[expID]
		n := int64(len(evs))
		last, err := s.takeEventSeqs(ctx, tx, expID, n)
		if err != nil {
			return err
		}
		if err := s.insertEvents(ctx, tx, expID, last-n+1, evs, now); err != nil {
			return err
		}
	}
	return nil
}

// takeEventSeqs moves the experiment's last event seq n further and
// returns it, in one round trip: MySQL hands the new value back as
// LAST_INSERT_ID(expr), SQLite with RETURNING. Either way it is the value
// this transaction wrote, whatever the isolation level's snapshot.
func (s *Store) takeEventSeqs(ctx context.Context, tx *sql.Tx, expID string, n int64) (int64, error) {
	db := s.prep(tx)
	var last int64
	if s.d.isMySQL() {
		res, err := db.ExecContext(ctx, "UPDATE experiments SET last_event_seq = LAST_INSERT_ID(last_event_seq + ?) WHERE id = ?", n, expID)
		if err != nil {
			return 0, dbErr("number events", err)
		}
		if k, err := res.RowsAffected(); err != nil {
			return 0, dbErr("number events", err)
		} else if k == 0 {
			return 0, errdefs.NotFound("experiment", expID)
		}
		if last, err = res.LastInsertId(); err != nil {
			return 0, dbErr("number events", err)
		}
		return last, nil
	}
	err := db.QueryRowContext(ctx, "UPDATE experiments SET last_event_seq = last_event_seq + ? WHERE id = ? RETURNING last_event_seq", n, expID).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, errdefs.NotFound("experiment", expID)
	}
	if err != nil {
		return 0, dbErr("number events", err)
	}
	return last, nil
}

// insertEvents writes evs, numbered from first, as one statement, and drops
// the experiment's events beyond the newest MaxEventsPerExp. A zero Time is
// now.
func (s *Store) insertEvents(ctx context.Context, tx *sql.Tx, expID string, first int64, evs []store.Event, now time.Time) error {
	db := s.prep(tx)
	args := make([]any, 0, len(evs)*(numCols(eventCols)+1))
	for i, e := range evs {
		at := e.Time
		if at.IsZero() {
			at = now
		}
		detail := e.Detail
		if detail == nil {
			detail = map[string]string{}
		}
		args = append(args, expID, first+int64(i), s.d.timeArg(at), e.Kind, e.EntityID, string(e.Status),
			cut(e.Reason, 128), cut(e.Message, store.MaxEventMessage), jsonArg(detail), s.writer)
	}
	q := "INSERT INTO exp_events (" + eventCols + ", writer) VALUES " +
		strings.TrimSuffix(strings.Repeat(placeholders(numCols(eventCols)+1)+", ", len(evs)), ", ")
	if _, err := db.ExecContext(ctx, q, args...); err != nil {
		return dbErr("append events", err)
	}
	if last := first + int64(len(evs)) - 1; last > store.MaxEventsPerExp {
		if _, err := db.ExecContext(ctx, "DELETE FROM exp_events WHERE exp_id = ? AND seq <= ?", expID, last-store.MaxEventsPerExp); err != nil {
			return dbErr("trim events", err)
		}
	}
	return nil
}

// rowState is what an event reports of an experiment or job row.
type rowState struct {
	status                  lifecycle.Status
	reason, message         string
	nodePool, cluster, role string // jobs only
}

// readRowState reads the row's state with a locking read, so that it is the
// latest committed one (a plain read on MySQL may see the transaction's
// older snapshot). NotFound when there is no row.
func (s *Store) readRowState(ctx context.Context, tx *sql.Tx, e entity, id string) (expID string, st rowState, err error) {
	db := s.prep(tx)
	switch e.table {
	case jobEntity.table:
		err = db.QueryRowContext(ctx, "SELECT exp_id, status, reason, message, node_pool, cluster_name, role FROM jobs WHERE id = ?"+s.d.forUpdate, id).
			Scan(&expID, &st.status, &st.reason, &st.message, &st.nodePool, &st.cluster, &st.role)
	case expEntity.table:
		expID = id
		err = db.QueryRowContext(ctx, "SELECT status, reason, message FROM experiments WHERE id = ?"+s.d.forUpdate, id).
			Scan(&st.status, &st.reason, &st.message)
	default:
		return "", st, fmt.Errorf("sqlstore: %s rows have no events", e.kind)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return "", st, errdefs.NotFound(e.kind, id)
	}
	if err != nil {
		return "", st, dbErr("read "+e.kind, err)
	}
	return expID, st, nil
}

// changeEvent is the event of a write that moved a row from before to
// after, and false when nothing a watcher sees changed: a write that
// repeats the row's state records nothing.
func changeEvent(kind, expID, id string, before, after rowState) (store.Event, bool) {
	if before == after {
		return store.Event{}, false
	}
	ev := store.Event{ExpID: expID, Kind: kind, EntityID: id, Status: after.status, Reason: after.reason, Message: after.message}
	detail := map[string]string{}
	if kind == store.EventJob && after.role != "" {
		detail["role"] = after.role
	}
	if after.nodePool != before.nodePool {
		detail["node_pool"] = after.nodePool
	}
	if after.cluster != before.cluster {
		detail["cluster"] = after.cluster
	}
	if len(detail) > 0 {
		ev.Detail = detail
	}
	return ev, true
}

// createdEvents are the first events of a new experiment: it and each of
// its jobs as created.
func createdEvents(exp *store.Experiment, jobs []*store.Job) []store.Event {
	out := []store.Event{{
		Time: exp.CreatedAt, ExpID: exp.ID, Kind: store.EventExperiment, EntityID: exp.ID,
		Status: exp.Status, Reason: exp.Reason, Message: exp.Message,
	}}
	for _, j := range jobs {
		ev, _ := changeEvent(store.EventJob, exp.ID, j.ID, rowState{},
			rowState{status: j.Status, reason: j.Reason, message: j.Message, nodePool: j.NodePool, cluster: j.ClusterName, role: j.Role})
		ev.Time = j.CreatedAt
		out = append(out, ev)
	}
	return out
}

// endingJob is a job an abort moves, as it was.
type endingJob struct {
	id string
	st rowState
}

// endingJobs reads the jobs that c selects with a locking read, before an
// abort writes them (the experiment's row lock is held).
func (s *Store) endingJobs(ctx context.Context, tx *sql.Tx, c conds) ([]endingJob, error) {
	rows, err := tx.QueryContext(ctx, "SELECT id, status, reason, message, node_pool, cluster_name, role FROM jobs"+c.sql()+" ORDER BY seq"+s.d.forUpdate, c.args...)
	if err != nil {
		return nil, dbErr("read jobs", err)
	}
	defer rows.Close()
	var out []endingJob
	for rows.Next() {
		var j endingJob
		if err := rows.Scan(&j.id, &j.st.status, &j.st.reason, &j.st.message, &j.st.nodePool, &j.st.cluster, &j.st.role); err != nil {
			return nil, dbErr("read jobs", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("read jobs", err)
	}
	return out, nil
}

// abortEvents are the events of an abort that moves exp (as read before
// it) and jobs to status, with Reason cleared: the experiment's first, as
// the user's call came first.
func abortEvents(exp *store.Experiment, jobs []endingJob, status lifecycle.Status, message, jobMessage string) []store.Event {
	var out []store.Event
	before := rowState{status: exp.Status, reason: exp.Reason, message: exp.Message}
	if ev, ok := changeEvent(store.EventExperiment, exp.ID, exp.ID, before, rowState{status: status, message: message}); ok {
		out = append(out, ev)
	}
	for _, j := range jobs {
		after := j.st
		after.status, after.reason, after.message = status, "", jobMessage
		if ev, ok := changeEvent(store.EventJob, exp.ID, j.id, j.st, after); ok {
			out = append(out, ev)
		}
	}
	return out
}

// newWriterID names one Store instance: random, so two processes never
// share one.
func newWriterID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// OtherWrites lists the events that other Store instances on this database
// (other server replicas) wrote at or after since, oldest first, at most
// limit (1000 when 0). An event's time is its writer's clock when it
// wrote, before its transaction committed, so a reader tailing them asks
// again from a little before the newest time it saw.
func (s *Store) OtherWrites(ctx context.Context, since time.Time, limit int) ([]store.EventRef, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	rows, err := s.reads.QueryContext(ctx, "SELECT exp_id, seq, at FROM exp_events WHERE at >= ? AND writer <> ? ORDER BY at LIMIT ?",
		s.d.timeArg(since), s.writer, limit)
	if err != nil {
		return nil, dbErr("list other writes", err)
	}
	defer rows.Close()
	var out []store.EventRef
	for rows.Next() {
		var r store.EventRef
		var at any
		if err := rows.Scan(&r.ExpID, &r.Seq, &at); err != nil {
			return nil, dbErr("list other writes", err)
		}
		t, _, err := parseTimeSrc(at)
		if err != nil {
			return nil, dbErr("list other writes", err)
		}
		r.Time = t
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list other writes", err)
	}
	return out, nil
}
