package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

// entity is what updateStatus needs to know about a table.
type entity struct {
	kind    string // in messages: "job job-abc is Aborting, not Running"
	table   string
	machine lifecycle.Machine
	// phases: the table has started_at, finished_at, aborting_at and
	// aborted_at.
	phases bool
}

var (
	expEntity = entity{"experiment", "experiments", lifecycle.ExperimentMachine, true}
	jobEntity = entity{"job", "jobs", lifecycle.JobMachine, true}
	artEntity = entity{"artifact", "artifacts", lifecycle.ArtifactMachine, false}
)

// updateStatus applies u as one conditional UPDATE ... WHERE id = ? AND
// status = ?, then calls read in the same transaction to load the row it
// wrote (MariaDB has no UPDATE ... RETURNING). The status check and the write
// are a single statement, so no other writer can slip in between: whoever
// loses a race sees 0 rows and gets ErrFailedPrecondition naming the status
// that won.
//
// An experiment's or a job's change is recorded as an event in the same
// transaction (see events.go).
func (s *Store) updateStatus(ctx context.Context, e entity, u store.StatusUpdate, read func(*sql.Tx) error) error {
	if err := checkUpdate(e, u); err != nil {
		return err
	}
	in := s.inTx
	if e.table == jobEntity.table {
		in = s.inJobTx
	}
	return in(ctx, func(tx *sql.Tx) error {
		if e.table == jobEntity.table {
			if err := s.lockJobsExps(ctx, tx, []string{u.ID}); err != nil {
				return err
			}
		}
		ev, err := s.applyStatus(ctx, tx, e, u)
		if err != nil {
			return err
		}
		if ev != nil {
			if err := s.appendEvents(ctx, tx, []store.Event{*ev}); err != nil {
				return err
			}
		}
		return read(tx)
	})
}

// checkUpdate refuses what no row could accept, before any transaction.
func checkUpdate(e entity, u store.StatusUpdate) error {
	if u.Expected == "" {
		return errdefs.Invalid("expected_status", "is required: pass the status you read, so that a change made since is not overwritten")
	}
	if u.FinishedAt != nil && (!e.phases || !e.machine.IsTerminal(u.Status)) {
		ends := make([]string, len(e.machine.Terminal))
		for i, st := range e.machine.Terminal {
			ends[i] = string(st)
		}
		return errdefs.Invalid("finished_at", "is only for an experiment's or a job's end (%s), not for %s %s", strings.Join(ends, ", "), e.kind, u.Status)
	}
	if u.StartedAt != nil && (!e.phases || u.Status != lifecycle.Running) {
		return errdefs.Invalid("started_at", "is only for an experiment or a job that runs (%s), not for %s %s", lifecycle.Running, e.kind, u.Status)
	}
	return e.machine.Check(u.Expected, u.Status)
}

// applyStatus is the conditional UPDATE of one row inside tx. For an
// experiment or a job it also returns the event of the change, nil when
// the write changes nothing a watcher sees; the caller holds the
// experiment's row lock (lockExps) and records the event in tx.
func (s *Store) applyStatus(ctx context.Context, tx *sql.Tx, e entity, u store.StatusUpdate) (*store.Event, error) {
	db := s.prep(tx)
	var (
		expID  string
		before rowState
		events = e.table != artEntity.table
	)
	if events {
		var err error
		if expID, before, err = s.readRowState(ctx, tx, e, u.ID); err != nil {
			return nil, err
		}
		if before.status != u.Expected {
			return nil, errdefs.Precondition("%s %s is %s, not %s", e.kind, u.ID, before.status, u.Expected)
		}
	}
	at := s.now()
	now := s.d.timeArg(at)
	sets := []string{"status = ?", "reason = ?", "message = ?", "version = version + 1", "updated_at = ?"}
	args := []any{string(u.Status), u.Reason, u.Message, now}
	if e.phases {
		// COALESCE keeps the first time: a same-status update (new
		// Reason or Message) must not move when the phase began.
		if u.Status == lifecycle.Running {
			if u.StartedAt != nil && u.StartedAt.Before(at) {
				// The start as its source saw it, never before the row
				// was created (clocks differ).
				t := s.d.timeArg(*u.StartedAt)
				sets, args = append(sets, "started_at = COALESCE(started_at, CASE WHEN ? < created_at THEN created_at ELSE ? END)"), append(args, t, t)
			} else {
				sets, args = append(sets, "started_at = COALESCE(started_at, ?)"), append(args, now)
			}
		}
		if u.Status == lifecycle.Aborting {
			sets, args = append(sets, "aborting_at = COALESCE(aborting_at, ?)"), append(args, now)
		}
		if u.Status == lifecycle.Aborted {
			sets, args = append(sets, "aborted_at = ?"), append(args, now)
		}
		if e.machine.IsTerminal(u.Status) {
			if u.FinishedAt != nil && u.FinishedAt.Before(at) {
				// The end as its source saw it, never before the row
				// began: clocks differ, and a cluster's times are in
				// whole seconds.
				t := s.d.timeArg(*u.FinishedAt)
				sets, args = append(sets, "finished_at = CASE WHEN ? < COALESCE(started_at, created_at) THEN COALESCE(started_at, created_at) ELSE ? END"), append(args, t, t)
			} else {
				sets, args = append(sets, "finished_at = ?"), append(args, now)
			}
		}
	}
	if e.table == jobEntity.table && u.Status == lifecycle.Pending && lifecycle.Acquiring(lifecycle.Reason(u.Reason)) {
		sets, args = append(sets, "dispatched_at = COALESCE(dispatched_at, ?)"), append(args, now)
	}
	if u.ClusterName != "" {
		sets, args = append(sets, "cluster_name = ?"), append(args, u.ClusterName)
	}
	if u.NodePool != "" {
		sets, args = append(sets, "node_pool = ?"), append(args, u.NodePool)
	}
	if u.Selection != "" {
		sets, args = append(sets, "selection = ?"), append(args, u.Selection)
	}
	args = append(args, u.ID, string(u.Expected))
	// version always changes, so a matched row is always a changed row
	// and MySQL's affected-rows count (changed, not matched, without
	// clientFoundRows) is 1 exactly when the precondition held.
	res, err := db.ExecContext(ctx, "UPDATE "+e.table+" SET "+strings.Join(sets, ", ")+" WHERE id = ? AND status = ?", args...)
	if err != nil {
		return nil, dbErr("update "+e.kind+" status", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, dbErr("update "+e.kind+" status", err)
	}
	if n == 0 {
		var cur lifecycle.Status
		err := db.QueryRowContext(ctx, "SELECT status FROM "+e.table+" WHERE id = ?", u.ID).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, errdefs.NotFound(e.kind, u.ID)
		}
		if err != nil {
			return nil, dbErr("update "+e.kind+" status", err)
		}
		return nil, errdefs.Precondition("%s %s is %s, not %s", e.kind, u.ID, cur, u.Expected)
	}
	if e.table == jobEntity.table && u.ClusterName != "" {
		// An experiment that names no cluster takes the first one a job of
		// it is placed on, so that `exp get` says where it runs and `exp
		// list --cluster` stays a lookup on an indexed column.
		if _, err := db.ExecContext(ctx, "UPDATE experiments SET cluster_name = ? WHERE id = (SELECT exp_id FROM jobs WHERE id = ?) AND cluster_name = ''",
			u.ClusterName, u.ID); err != nil {
			return nil, dbErr("record the experiment's cluster", err)
		}
	}
	if !events {
		return nil, nil
	}
	after := before
	after.status, after.reason, after.message = u.Status, u.Reason, u.Message
	if u.NodePool != "" {
		after.nodePool = u.NodePool
	}
	if u.ClusterName != "" {
		after.cluster = u.ClusterName
	}
	ev, changed := changeEvent(e.kind, expID, u.ID, before, after)
	if !changed {
		return nil, nil
	}
	ev.Time = at
	return &ev, nil
}

// applyBatch applies us in order inside tx, whose caller holds the
// experiments' row locks: each under its own precondition, so an update
// refused (errs[i]: invalid, not found, failed precondition; the caller may
// have refused some already) leaves the others alone, and a later update of
// a row sees an earlier one's write. read loads row i as written. Only a
// database failure is returned, and fails the whole batch.
func (s *Store) applyBatch(ctx context.Context, tx *sql.Tx, e entity, us []store.StatusUpdate, errs []error, read func(i int) error) error {
	var events []store.Event
	for i, u := range us {
		if errs[i] != nil {
			continue
		}
		if errs[i] = checkUpdate(e, u); errs[i] != nil {
			continue
		}
		ev, err := s.applyStatus(ctx, tx, e, u)
		if err != nil {
			if !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrFailedPrecondition) {
				return err
			}
			errs[i] = err
			continue
		}
		if ev != nil {
			events = append(events, *ev)
		}
		if err := read(i); err != nil {
			return err
		}
	}
	return s.appendEvents(ctx, tx, events)
}

// UpdateJobStatuses implements store.Store: every update in one
// transaction, each with its own precondition. An update whose precondition
// fails (or that is invalid) gets its error in errs and leaves the others
// alone; only a database failure fails the whole batch. The experiments of
// the jobs whose status moved follow them in the same transaction
// (propagate).
func (s *Store) UpdateJobStatuses(ctx context.Context, us []store.StatusUpdate) (jobs []*store.Job, errs []error, exps []store.ExpChange, err error) {
	err = s.inJobTx(ctx, func(tx *sql.Tx) error {
		jobs, errs = make([]*store.Job, len(us)), make([]error, len(us))
		ids := make([]string, len(us))
		for i, u := range us {
			ids[i] = u.ID
		}
		// Every experiment of the batch at once, in ID order: two batches
		// naming the same experiments in different orders must not
		// deadlock.
		if err := s.lockJobsExps(ctx, tx, ids); err != nil {
			return err
		}
		// The experiments of the jobs whose status the batch moved. A
		// Reason or Message within a status (a queue position, most of
		// the resource manager's writes) changes no experiment's status:
		// its mirror is left to the expController's batch, off the path
		// every status write of the resource manager waits on.
		var moved []string
		if err := s.applyBatch(ctx, tx, jobEntity, us, errs, func(i int) (err error) {
			jobs[i], err = s.getJob(ctx, s.prep(tx), us[i].ID)
			if err == nil && us[i].Expected != us[i].Status {
				moved = append(moved, jobs[i].ExpID)
			}
			return err
		}); err != nil {
			return err
		}
		exps, err = s.propagate(ctx, tx, moved)
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return jobs, errs, exps, nil
}
