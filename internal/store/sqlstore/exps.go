package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

const (
	expInsertCols = "id, name, exp_type, cluster_name, priority, tags, config, role_to_task_spec, " +
		"status, reason, message, creator, creator_id, artifact_path, version, " +
		"created_at, updated_at, started_at, finished_at, aborting_at, aborted_at, metric_specs, " +
		"ttl_ms, idle_ttl_ms, interactive, expires_at, active_at, ttl_warned_for"
	expCols = "seq, " + expInsertCols
)

func (s *Store) expArgs(e *store.Experiment) []any {
	return []any{
		e.ID, e.Name, e.ExpType, e.ClusterName, e.Priority, jsonArg(e.Tags), e.Config, jsonArg(e.RoleToTaskSpec),
		string(e.Status), e.Reason, e.Message, e.Creator, e.CreatorID, e.ArtifactPath, e.Version,
		s.d.timeArg(e.CreatedAt), s.d.timeArg(e.UpdatedAt), s.d.timePtrArg(e.StartedAt),
		s.d.timePtrArg(e.FinishedAt), s.d.timePtrArg(e.AbortingAt), s.d.timePtrArg(e.AbortedAt),
		jsonArg(nonNil(e.Metrics)),
		e.TTL.Milliseconds(), e.IdleTTL.Milliseconds(), e.Interactive,
		s.d.timePtrArg(e.ExpiresAt), s.d.timePtrArg(e.ActiveAt), s.d.timePtrArg(e.TTLWarnedFor),
	}
}

// nonNil stores an empty list as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func scanExp(sc scanner) (*store.Experiment, int64, error) {
	var e store.Experiment
	var seq, ttlMS, idleMS int64
	err := sc.Scan(&seq, &e.ID, &e.Name, &e.ExpType, &e.ClusterName, &e.Priority,
		jsonCol{&e.Tags}, &e.Config, jsonCol{&e.RoleToTaskSpec},
		&e.Status, &e.Reason, &e.Message, &e.Creator, &e.CreatorID, &e.ArtifactPath, &e.Version,
		timeCol{&e.CreatedAt}, timeCol{&e.UpdatedAt}, nullTimeCol{&e.StartedAt},
		nullTimeCol{&e.FinishedAt}, nullTimeCol{&e.AbortingAt}, nullTimeCol{&e.AbortedAt},
		jsonCol{&e.Metrics},
		&ttlMS, &idleMS, &e.Interactive,
		nullTimeCol{&e.ExpiresAt}, nullTimeCol{&e.ActiveAt}, nullTimeCol{&e.TTLWarnedFor})
	if len(e.Metrics) == 0 {
		e.Metrics = nil
	}
	e.TTL, e.IdleTTL = time.Duration(ttlMS)*time.Millisecond, time.Duration(idleMS)*time.Millisecond
	return &e, seq, err
}

// CreateExp implements store.Store. It sets Version to 1, fills zero
// CreatedAt/UpdatedAt from the clock and normalises every timestamp to what
// a later read returns (UTC, microseconds), so the caller's structs equal
// the stored rows. An empty status means the machine's initial one; an empty
// ExpID on a job or the artifact means exp's.
func (s *Store) CreateExp(ctx context.Context, exp *store.Experiment, jobs []*store.Job, art *store.Artifact) error {
	if err := s.prepareCreate(exp, jobs, art); err != nil {
		return err
	}
	// The first events are numbered 1..n with the insert itself: no other
	// writer can know the experiment yet.
	events := createdEvents(exp, jobs)
	return s.inTx(ctx, func(tx *sql.Tx) error {
		db := s.prep(tx) // a create's inserts are the same text every time
		if _, err := db.ExecContext(ctx, insertSQL("experiments", expInsertCols+", last_event_seq"),
			append(s.expArgs(exp), len(events))...); err != nil {
			switch col, _ := uniqueViolation(err); col {
			case "name":
				// The insert failed alone; the transaction can still read.
				var holder string
				_ = tx.QueryRowContext(ctx, "SELECT id FROM experiments WHERE name = ?", exp.Name).Scan(&holder)
				return store.NameTakenError(exp.Name, holder)
			case "id":
				return fmt.Errorf("experiment %q: %w", exp.ID, errdefs.ErrAlreadyExists)
			}
			return dbErr("insert experiment", err)
		}
		for _, j := range jobs {
			if _, err := db.ExecContext(ctx, insertSQL("jobs", jobInsertCols),
				s.jobArgs(j)...); err != nil {
				if _, dup := uniqueViolation(err); dup {
					return fmt.Errorf("job %q: %w", j.ID, errdefs.ErrAlreadyExists)
				}
				return dbErr("insert job", err)
			}
		}
		if art != nil {
			if _, err := db.ExecContext(ctx, insertSQL("artifacts", artInsertCols),
				s.artArgs(art)...); err != nil {
				if _, dup := uniqueViolation(err); dup {
					return fmt.Errorf("artifact %q: %w", art.ID, errdefs.ErrAlreadyExists)
				}
				return dbErr("insert artifact", err)
			}
		}
		return s.insertEvents(ctx, tx, exp.ID, 1, events, exp.CreatedAt)
	})
}

// prepareCreate validates what only the store can check (the API server
// validates the rest) and fills the fields the store owns.
func (s *Store) prepareCreate(exp *store.Experiment, jobs []*store.Job, art *store.Artifact) error {
	if exp == nil {
		return errdefs.Invalid("experiment", "is required")
	}
	var errs errdefs.FieldErrors
	if exp.ID == "" {
		errs.Add("id", "is required")
	}
	if exp.Name == "" {
		errs.Add("name", "is required")
	}
	now := s.now()
	stamp := func(created, updated *time.Time) {
		if created.IsZero() {
			*created = now
		}
		if updated.IsZero() {
			*updated = now
		}
		*created, *updated = normTime(*created), normTime(*updated)
	}
	initial := func(st *lifecycle.Status, m lifecycle.Machine, field string) {
		if *st == "" {
			*st = m.Initial
		}
		if !m.Valid(*st) {
			errs.Add(field, "%q is not a %s status", *st, m.Kind)
		}
	}
	owned := func(expID *string, field string) {
		if *expID == "" {
			*expID = exp.ID
		}
		if exp.ID != "" && *expID != exp.ID {
			errs.Add(field, "is %q, want the experiment's ID %q", *expID, exp.ID)
		}
	}

	exp.Version = 1
	stamp(&exp.CreatedAt, &exp.UpdatedAt)
	exp.StartedAt, exp.FinishedAt = normTimePtr(exp.StartedAt), normTimePtr(exp.FinishedAt)
	exp.AbortingAt, exp.AbortedAt = normTimePtr(exp.AbortingAt), normTimePtr(exp.AbortedAt)
	initial(&exp.Status, lifecycle.ExperimentMachine, "status")
	for i, j := range jobs {
		field := fmt.Sprintf("jobs[%d]", i)
		if j == nil {
			errs.Add(field, "is nil")
			continue
		}
		if j.ID == "" {
			errs.Add(field+".id", "is required")
		}
		owned(&j.ExpID, field+".exp_id")
		j.Version = 1
		stamp(&j.CreatedAt, &j.UpdatedAt)
		j.StartedAt, j.FinishedAt = normTimePtr(j.StartedAt), normTimePtr(j.FinishedAt)
		j.AbortingAt, j.AbortedAt = normTimePtr(j.AbortingAt), normTimePtr(j.AbortedAt)
		initial(&j.Status, lifecycle.JobMachine, field+".status")
	}
	if art != nil {
		if art.ID == "" {
			errs.Add("artifact.id", "is required")
		}
		owned(&art.ExpID, "artifact.exp_id")
		art.Version = 1
		stamp(&art.CreatedAt, &art.UpdatedAt)
		initial(&art.Status, lifecycle.ArtifactMachine, "artifact.status")
	}
	return errs.Err()
}

// GetExp implements store.Store.
func (s *Store) GetExp(ctx context.Context, id string) (*store.Experiment, error) {
	return s.getExp(ctx, s.reads, id, "")
}

// ExpNameTaken implements store.Store.
func (s *Store) ExpNameTaken(ctx context.Context, name string) (string, error) {
	var id string
	err := s.reads.QueryRowContext(ctx, "SELECT id FROM experiments WHERE name = ?", name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", dbErr("look up experiment name", err)
	}
	return id, nil
}

// getExp reads one experiment; lock is "" or the dialect's FOR UPDATE.
func (s *Store) getExp(ctx context.Context, q querier, id, lock string) (*store.Experiment, error) {
	e, _, err := scanExp(q.QueryRowContext(ctx, "SELECT "+expCols+" FROM experiments WHERE id = ?"+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("experiment", id)
	}
	if err != nil {
		return nil, dbErr("get experiment", err)
	}
	return e, nil
}

// ListExps implements store.Store: newest first.
func (s *Store) ListExps(ctx context.Context, f store.ExpFilter) ([]*store.Experiment, string, error) {
	c, err := s.expConds(f)
	if err != nil {
		return nil, "", err
	}
	return listPage(ctx, s.reads, "experiments", expCols, c, f.Page, true, scanExp)
}

// expConds is ListExps's filter.
func (s *Store) expConds(f store.ExpFilter) (conds, error) {
	var c conds
	col := s.d.keyed(len(f.IDs) > 0)
	// An experiment's cluster is the one it was pinned to or, if none, the
	// first one a job of it was placed on (see applyStatus).
	c.eq(col("cluster_name"), f.ClusterName)
	c.eq(col("status"), string(f.Status))
	c.eq(col("exp_type"), f.ExpType)
	c.eq(col("creator"), f.Creator)
	c.eq(col("creator_id"), f.CreatorID)
	c.in("id", f.IDs)
	if f.NamePrefix {
		c.add("name LIKE ? ESCAPE '!'", likeEscape(f.Name)+"%")
	} else {
		c.eq("name", f.Name)
	}
	for _, tag := range f.Tags {
		// tags is a JSON array of strings: a tag is there when its JSON
		// string, quotes included, is.
		b, err := json.Marshal(tag)
		if err != nil {
			return conds{}, err
		}
		c.add("tags LIKE ? ESCAPE '!'", "%"+likeEscape(string(b))+"%")
	}
	return c, nil
}

// likeEscape makes s match itself in a LIKE pattern with ESCAPE '!' (not a
// backslash, which MySQL string literals would eat).
func likeEscape(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}

// UpdateExpStatus implements store.Store.
func (s *Store) UpdateExpStatus(ctx context.Context, u store.StatusUpdate) (*store.Experiment, error) {
	if err := expOnly(u); err != nil {
		return nil, err
	}
	var out *store.Experiment
	err := s.updateStatus(ctx, expEntity, u, func(tx *sql.Tx) (err error) {
		out, err = s.getExp(ctx, tx, u.ID, "")
		return err
	})
	return out, err
}

// expOnly refuses the fields of a status update that only jobs have.
func expOnly(u store.StatusUpdate) error {
	if u.ClusterName != "" || u.NodePool != "" {
		return errdefs.Invalid("cluster_name", "cluster_name and node_pool apply to jobs only")
	}
	return nil
}

// UpdateExpStatuses implements store.Store. The experiments' rows are
// locked first, all at once in ID order, so two batches naming the same
// experiments cannot deadlock and every update's event is numbered under
// its experiment's lock.
func (s *Store) UpdateExpStatuses(ctx context.Context, us []store.StatusUpdate) (exps []*store.Experiment, errs []error, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		exps, errs = make([]*store.Experiment, len(us)), make([]error, len(us))
		ids := make([]string, len(us))
		for i, u := range us {
			ids[i] = u.ID
			errs[i] = expOnly(u)
		}
		if err := s.lockExps(ctx, tx, ids); err != nil {
			return err
		}
		return s.applyBatch(ctx, tx, expEntity, us, errs, func(i int) (err error) {
			exps[i], err = s.getExp(ctx, s.prep(tx), us[i].ID, "")
			return err
		})
	})
	if err != nil {
		return nil, nil, err
	}
	return exps, errs, nil
}

// abortableJobs are the job statuses AbortExp moves to Aborting: those the
// job machine lets move there, other than Aborting itself.
var abortableJobs = func() []string {
	var out []string
	for _, st := range lifecycle.JobMachine.NonTerminal() {
		if st != lifecycle.Aborting && lifecycle.JobMachine.Can(st, lifecycle.Aborting) {
			out = append(out, string(st))
		}
	}
	return out
}()

// forceAbortableJobs are the job statuses ForceAbortExp moves to Aborted:
// every non-terminal one with a legal path there through Aborting.
var forceAbortableJobs = func() []string {
	var out []string
	for _, st := range lifecycle.JobMachine.NonTerminal() {
		if throughAborting(lifecycle.JobMachine, st) == nil {
			out = append(out, string(st))
		}
	}
	return out
}()

// throughAborting checks that from -> Aborting -> Aborted is legal in m
// (from may be Aborting itself): a forced abort ends where an abort the
// controllers finished would, by the same steps, written at once.
func throughAborting(m lifecycle.Machine, from lifecycle.Status) error {
	if from != lifecycle.Aborting {
		if err := m.Check(from, lifecycle.Aborting); err != nil {
			return err
		}
	}
	return m.Check(lifecycle.Aborting, lifecycle.Aborted)
}

// ForceAbortExp implements store.Store. It locks the experiment row first,
// as AbortExp does, so a concurrent status update either lands before (and
// the finished job is skipped) or fails its precondition.
func (s *Store) ForceAbortExp(ctx context.Context, id, message, jobMessage string) (*store.Experiment, bool, error) {
	var (
		out     *store.Experiment
		changed bool
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		changed = false
		e, err := s.getExp(ctx, tx, id, s.d.forUpdate)
		if err != nil {
			return err
		}
		out = e
		if lifecycle.ExperimentMachine.IsTerminal(e.Status) {
			return nil
		}
		if err := throughAborting(lifecycle.ExperimentMachine, e.Status); err != nil {
			return err
		}
		now := s.d.timeArg(s.now())
		// aborting_at keeps the time of an abort already under way: how
		// long the cluster was given before someone forced it.
		const sets = "status = ?, reason = '', message = ?, version = version + 1, updated_at = ?, " +
			"aborting_at = COALESCE(aborting_at, ?), aborted_at = ?, finished_at = ?"
		if _, err := tx.ExecContext(ctx, "UPDATE experiments SET "+sets+" WHERE id = ?",
			string(lifecycle.Aborted), message, now, now, now, now, id); err != nil {
			return dbErr("force-abort experiment", err)
		}
		var c conds
		c.eq("exp_id", id)
		c.in("status", forceAbortableJobs)
		ended, err := s.endingJobs(ctx, tx, c)
		if err != nil {
			return err
		}
		args := append([]any{string(lifecycle.Aborted), jobMessage, now, now, now, now}, c.args...)
		if _, err := tx.ExecContext(ctx, "UPDATE jobs SET "+sets+c.sql(), args...); err != nil {
			return dbErr("force-abort jobs", err)
		}
		if out, err = s.getExp(ctx, tx, id, ""); err != nil {
			return err
		}
		changed = true
		return s.appendEvents(ctx, tx, abortEvents(e, ended, lifecycle.Aborted, message, jobMessage))
	})
	if err != nil {
		return nil, false, err
	}
	return out, changed, nil
}

// AbortExp implements store.Store. The experiment row is locked first, so an
// abort and a concurrent job status update serialise on the job rows: the
// update either lands before (and the abort skips the finished job) or
// finds the job Aborting and fails its precondition.
func (s *Store) AbortExp(ctx context.Context, id, message string) (*store.Experiment, bool, error) {
	var (
		out     *store.Experiment
		changed bool
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		changed = false
		e, err := s.getExp(ctx, tx, id, s.d.forUpdate)
		if err != nil {
			return err
		}
		out = e
		if lifecycle.ExperimentMachine.IsTerminal(e.Status) || e.Status == lifecycle.Aborting {
			return nil
		}
		if err := lifecycle.ExperimentMachine.Check(e.Status, lifecycle.Aborting); err != nil {
			return err
		}
		now := s.now()
		if _, err := tx.ExecContext(ctx, "UPDATE experiments SET status = ?, reason = '', message = ?, "+
			"version = version + 1, updated_at = ?, aborting_at = ? WHERE id = ?",
			string(lifecycle.Aborting), message, s.d.timeArg(now), s.d.timeArg(now), id); err != nil {
			return dbErr("abort experiment", err)
		}
		var c conds
		c.eq("exp_id", id)
		c.in("status", abortableJobs)
		ending, err := s.endingJobs(ctx, tx, c)
		if err != nil {
			return err
		}
		args := append([]any{string(lifecycle.Aborting), message, s.d.timeArg(now), s.d.timeArg(now)}, c.args...)
		if _, err := tx.ExecContext(ctx, "UPDATE jobs SET status = ?, reason = '', message = ?, "+
			"version = version + 1, updated_at = ?, aborting_at = ?"+c.sql(), args...); err != nil {
			return dbErr("abort jobs", err)
		}
		events := abortEvents(e, ending, lifecycle.Aborting, message, message)
		e.Status, e.Reason, e.Message = lifecycle.Aborting, "", message
		e.Version++
		e.UpdatedAt, e.AbortingAt = now, &now
		changed = true
		return s.appendEvents(ctx, tx, events)
	})
	if err != nil {
		return nil, false, err
	}
	return out, changed, nil
}

// DeleteExp implements store.Store.
func (s *Store) DeleteExp(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var st lifecycle.Status
		err := tx.QueryRowContext(ctx, "SELECT status FROM experiments WHERE id = ?"+s.d.forUpdate, id).Scan(&st)
		if errors.Is(err, sql.ErrNoRows) {
			return errdefs.NotFound("experiment", id)
		}
		if err != nil {
			return dbErr("delete experiment", err)
		}
		switch {
		case st == lifecycle.Aborting:
			return errdefs.Precondition("experiment %s is %s: wait for the abort to finish", id, st)
		case !lifecycle.ExperimentMachine.IsTerminal(st):
			return errdefs.Precondition("experiment %s is %s: abort it first", id, st)
		}
		// Children first: they reference the experiment.
		for _, q := range []string{
			"DELETE FROM metric_points WHERE exp_id = ?",
			"DELETE FROM metric_cursors WHERE exp_id = ?",
			"DELETE FROM artifact_files WHERE artifact_id IN (SELECT id FROM artifacts WHERE exp_id = ?)",
			"DELETE FROM artifacts WHERE exp_id = ?",
			"DELETE FROM jobs WHERE exp_id = ?",
			"DELETE FROM exp_events WHERE exp_id = ?",
			"DELETE FROM experiments WHERE id = ?",
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return dbErr("delete experiment", err)
			}
		}
		return nil
	})
}
