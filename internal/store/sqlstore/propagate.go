package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

// propagate brings the experiments expIDs in line with their jobs inside
// tx, whose caller has just written some of those jobs and holds the
// experiments' row locks: it applies the artifact and experiment steps of
// the plan lifecycle.Propagate derives, exactly as the expController
// would, in the same transaction. So a job's end is its experiment's end
// in one write, instead of a controller cycle (three reads and two writes
// through the API server) later.
//
// A plan that aborts sibling jobs is left whole to the expController,
// which also owns the sibling aborts' order (abort first, then the
// experiment's message); so is an experiment whose step the machines
// refuse, which cannot happen for a plan derived from the rows this
// transaction holds. Either way the experiment is not settled
// (store.ExpChange), so the job's change wakes the expController, which
// does what is left here.
//
// It says what it did to each experiment, in ID order (store.ExpChange).
func (s *Store) propagate(ctx context.Context, tx *sql.Tx, expIDs []string) ([]store.ExpChange, error) {
	expIDs = slices.Compact(slices.Sorted(slices.Values(expIDs)))
	var changed []store.ExpChange
	for start := 0; start < len(expIDs); start += propagateChunk {
		chunk := expIDs[start:min(start+propagateChunk, len(expIDs))]
		exps, err := s.propagateChunk(ctx, tx, chunk)
		if err != nil {
			return nil, err
		}
		changed = append(changed, exps...)
	}
	return changed, nil
}

// propagateChunk bounds the IN lists of one propagate read.
const propagateChunk = 500

func (s *Store) propagateChunk(ctx context.Context, tx *sql.Tx, ids []string) ([]store.ExpChange, error) {
	// Only the columns the plan reads: the rows' large ones (task specs,
	// configs) would cost more to scan than the whole plan, inside the
	// write lock that every status write of the resource manager waits on.
	db := s.prep(tx)
	var c conds
	c.in("exp_id", ids)
	jobs := map[string][]lifecycle.Entity{}
	if err := queryEach(ctx, db, "SELECT exp_id, id, role, status, reason, message, started_at, finished_at FROM jobs"+c.sql(), c.args, func(sc scanner) error {
		var expID string
		var j lifecycle.Entity
		var started, finished *time.Time
		if err := sc.Scan(&expID, &j.ID, &j.Role, &j.Status, &j.Reason, &j.Message, nullTimeCol{&started}, nullTimeCol{&finished}); err != nil {
			return err
		}
		if started != nil {
			j.StartedAt = *started
		}
		if finished != nil {
			j.FinishedAt = *finished
		}
		jobs[expID] = append(jobs[expID], j)
		return nil
	}); err != nil {
		return nil, dbErr("read the jobs to propagate", err)
	}
	arts := map[string]*lifecycle.Entity{}
	// Oldest first, and the first one kept: the expController reads an
	// experiment's artifacts in the same order and keeps the same one.
	if err := queryEach(ctx, db, "SELECT exp_id, id, status, reason, message FROM artifacts"+c.sql()+" ORDER BY seq", c.args, func(sc scanner) error {
		var expID string
		var a lifecycle.Entity
		if err := sc.Scan(&expID, &a.ID, &a.Status, &a.Reason, &a.Message); err != nil {
			return err
		}
		if arts[expID] == nil {
			arts[expID] = &a
		}
		return nil
	}); err != nil {
		return nil, dbErr("read the artifacts to propagate", err)
	}
	type expRow struct {
		lifecycle.Entity
		name, cluster string
		// timed: a time-to-live, an idle one or an extension.
		timed bool
	}
	var e conds
	e.in("id", ids)
	exps := map[string]expRow{}
	if err := queryEach(ctx, db, "SELECT id, name, cluster_name, status, reason, message, ttl_ms, idle_ttl_ms, expires_at FROM experiments"+e.sql(), e.args, func(sc scanner) error {
		var x expRow
		var ttl, idle int64
		var expires *time.Time
		if err := sc.Scan(&x.ID, &x.name, &x.cluster, &x.Status, &x.Reason, &x.Message, &ttl, &idle, nullTimeCol{&expires}); err != nil {
			return err
		}
		x.timed = ttl > 0 || idle > 0 || expires != nil
		exps[x.ID] = x
		return nil
	}); err != nil {
		return nil, dbErr("read the experiments to propagate", err)
	}

	var events []store.Event
	out := make([]store.ExpChange, 0, len(ids))
	for _, id := range ids {
		x, ok := exps[id]
		if !ok {
			continue // deleted
		}
		p := lifecycle.Propagate(x.Entity, jobs[id], arts[id])
		c := store.ExpChange{ID: id, Name: x.name, ClusterName: x.cluster, From: x.Status, Status: x.Status, Reason: x.Reason}
		done := p.Empty()
		if !done && len(p.AbortJobs) == 0 {
			evs, applied, err := s.applyPlan(ctx, tx, p)
			if err != nil {
				return nil, err
			}
			events = append(events, evs...)
			done = applied
			if applied && len(p.Exp) > 0 {
				last := p.Exp[len(p.Exp)-1]
				c.Status, c.Reason, c.Changed = last.To, last.Reason, true
			}
		}
		// An experiment with a time-to-live is the expController's to
		// watch: it must see the moment it starts running.
		c.Settled = done && !x.timed
		out = append(out, c)
	}
	if err := s.appendEvents(ctx, tx, events); err != nil {
		return nil, err
	}
	return out, nil
}

// applyPlan applies p's artifact step, then its experiment steps, in
// order, returning the experiment's events and whether every step landed.
// A step the machines or the rows refuse stops the plan there, leaving
// the rest to the expController.
func (s *Store) applyPlan(ctx context.Context, tx *sql.Tx, p lifecycle.Plan) ([]store.Event, bool, error) {
	var events []store.Event
	step := func(e entity, u lifecycle.Update) (bool, error) {
		su := store.StatusUpdate{ID: u.ID, Expected: u.From, Status: u.To, Reason: u.Reason, Message: u.Message}
		if !u.StartedAt.IsZero() {
			su.StartedAt = &u.StartedAt
		}
		if !u.FinishedAt.IsZero() {
			su.FinishedAt = &u.FinishedAt
		}
		if checkUpdate(e, su) != nil {
			return false, nil
		}
		ev, err := s.applyStatus(ctx, tx, e, su)
		if errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if ev != nil {
			events = append(events, *ev)
		}
		return true, nil
	}
	if p.Artifact != nil {
		if ok, err := step(artEntity, *p.Artifact); !ok {
			return events, false, err
		}
	}
	for _, u := range p.Exp {
		if ok, err := step(expEntity, u); !ok {
			return events, false, err
		}
	}
	return events, true, nil
}

// queryEach runs q and hands each row to each to scan.
func queryEach(ctx context.Context, db querier, q string, args []any, each func(scanner) error) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
