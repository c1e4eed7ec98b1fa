package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

// ExtendExp implements store.Store: a running experiment now expires at
// at; one that has not run yet gets ttl, counted from when it runs. The
// warning given for the old expiry no longer counts.
func (s *Store) ExtendExp(ctx context.Context, id string, at time.Time, ttl time.Duration) (*store.Experiment, error) {
	var out *store.Experiment
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		e, err := s.getExp(ctx, tx, id, s.d.forUpdate)
		if err != nil {
			return err
		}
		if lifecycle.ExperimentMachine.IsTerminal(e.Status) || e.Status == lifecycle.Aborting {
			return errdefs.Precondition("experiment %s is %s; only a pending or running experiment can be extended", id, e.Status)
		}
		now := s.now()
		at = normTime(at)
		if e.StartedAt != nil {
			e.ExpiresAt = &at
		} else {
			e.TTL = ttl
		}
		e.TTLWarnedFor = nil
		if _, err := tx.ExecContext(ctx, "UPDATE experiments SET ttl_ms = ?, expires_at = ?, ttl_warned_for = NULL, "+
			"version = version + 1, updated_at = ? WHERE id = ?",
			e.TTL.Milliseconds(), s.d.timePtrArg(e.ExpiresAt), s.d.timeArg(now), id); err != nil {
			return dbErr("extend experiment", err)
		}
		e.Version++
		e.UpdatedAt = now
		out = e
		return nil
	})
	return out, err
}

// MarkTTLWarned implements store.Store: it records that the warning for
// expiry was given, and reports whether this call is the one that did, so
// of several servers only one emits the warning.
func (s *Store) MarkTTLWarned(ctx context.Context, id string, expiry time.Time) (bool, error) {
	at := s.d.timeArg(normTime(expiry))
	res, err := s.wdb.ExecContext(ctx, "UPDATE experiments SET ttl_warned_for = ? WHERE id = ? AND (ttl_warned_for IS NULL OR ttl_warned_for <> ?)",
		at, id, at)
	if err != nil {
		return false, dbErr("mark ttl warned", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, dbErr("mark ttl warned", err)
	}
	return n == 1, nil
}

// TouchExpActivity implements store.Store: the experiment was active at
// at (an exec session, a rank's output). Only a later time is written, so
// callers in any order leave the latest.
func (s *Store) TouchExpActivity(ctx context.Context, id string, at time.Time) error {
	t := s.d.timeArg(normTime(at))
	if _, err := s.wdb.ExecContext(ctx, "UPDATE experiments SET active_at = ? WHERE id = ? AND (active_at IS NULL OR active_at < ?)",
		t, id, t); err != nil {
		return dbErr("touch experiment activity", err)
	}
	return nil
}
