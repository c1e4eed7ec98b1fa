package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

const (
	jobInsertCols = "id, exp_id, exp_name, role, cluster_name, exp_type, priority, task_spec, " +
		"status, reason, message, creator, artifact_id, artifact_path, version, " +
		"created_at, updated_at, started_at, finished_at, aborting_at, aborted_at, dispatched_at, node_pool, selection"
	jobCols = "seq, " + jobInsertCols
)

func (s *Store) jobArgs(j *store.Job) []any {
	return []any{
		j.ID, j.ExpID, j.ExpName, j.Role, j.ClusterName, j.ExpType, j.Priority, jsonArg(j.TaskSpec),
		string(j.Status), j.Reason, j.Message, j.Creator, j.ArtifactID, j.ArtifactPath, j.Version,
		s.d.timeArg(j.CreatedAt), s.d.timeArg(j.UpdatedAt), s.d.timePtrArg(j.StartedAt),
		s.d.timePtrArg(j.FinishedAt), s.d.timePtrArg(j.AbortingAt), s.d.timePtrArg(j.AbortedAt),
		s.d.timePtrArg(j.DispatchedAt), j.NodePool, nullStrArg(j.Selection),
	}
}

func scanJob(sc scanner) (*store.Job, int64, error) {
	var j store.Job
	var seq int64
	err := sc.Scan(&seq, &j.ID, &j.ExpID, &j.ExpName, &j.Role, &j.ClusterName, &j.ExpType, &j.Priority,
		jsonCol{&j.TaskSpec}, &j.Status, &j.Reason, &j.Message, &j.Creator, &j.ArtifactID, &j.ArtifactPath, &j.Version,
		timeCol{&j.CreatedAt}, timeCol{&j.UpdatedAt}, nullTimeCol{&j.StartedAt},
		nullTimeCol{&j.FinishedAt}, nullTimeCol{&j.AbortingAt}, nullTimeCol{&j.AbortedAt},
		nullTimeCol{&j.DispatchedAt}, &j.NodePool, nullStrCol{&j.Selection})
	return &j, seq, err
}

// GetJob implements store.Store.
func (s *Store) GetJob(ctx context.Context, id string) (*store.Job, error) {
	return s.getJob(ctx, s.reads, id)
}

func (s *Store) getJob(ctx context.Context, q querier, id string) (*store.Job, error) {
	j, _, err := scanJob(q.QueryRowContext(ctx, "SELECT "+jobCols+" FROM jobs WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("job", id)
	}
	if err != nil {
		return nil, dbErr("get job", err)
	}
	return j, nil
}

// ListJobs implements store.Store: oldest first.
func (s *Store) ListJobs(ctx context.Context, f store.JobFilter) ([]*store.Job, string, error) {
	return listPage(ctx, s.reads, "jobs", jobCols, s.jobConds(f), f.Page, false, scanJob)
}

// jobConds is ListJobs's filter.
func (s *Store) jobConds(f store.JobFilter) conds {
	var c conds
	col := s.d.keyed(f.ExpID != "" || len(f.ExpIDs) > 0)
	c.eq("exp_id", f.ExpID)
	c.in("exp_id", f.ExpIDs)
	c.in(col("status"), statusStrings(f.Statuses))
	c.eq(col("cluster_name"), f.ClusterName)
	if !f.CreatedSince.IsZero() {
		c.add("created_at >= ?", s.d.timeArg(f.CreatedSince))
	}
	return c
}

// UpdateJobStatus implements store.Store. A non-empty u.ClusterName records
// where the job was dispatched, in the same statement.
func (s *Store) UpdateJobStatus(ctx context.Context, u store.StatusUpdate) (*store.Job, error) {
	var out *store.Job
	err := s.updateStatus(ctx, jobEntity, u, func(tx *sql.Tx) (err error) {
		out, err = s.getJob(ctx, s.prep(tx), u.ID)
		return err
	})
	return out, err
}

// AppendJobMessage implements store.Store.
func (s *Store) AppendJobMessage(ctx context.Context, id, note string) (*store.Job, error) {
	if note == "" {
		return nil, errdefs.Invalid("note", "is required")
	}
	var out *store.Job
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.lockJobsExps(ctx, tx, []string{id}); err != nil {
			return err
		}
		expID, before, err := s.readRowState(ctx, tx, jobEntity, id)
		if err != nil {
			return err
		}
		msg := note
		if before.message != "" {
			msg = before.message + "; " + note
		}
		now := s.now()
		if _, err := tx.ExecContext(ctx, "UPDATE jobs SET message = ?, version = version + 1, updated_at = ? WHERE id = ?",
			msg, s.d.timeArg(now), id); err != nil {
			return dbErr("append job message", err)
		}
		after := before
		after.message = msg
		ev, _ := changeEvent(store.EventJob, expID, id, before, after)
		ev.Time = now
		if err := s.appendEvents(ctx, tx, []store.Event{ev}); err != nil {
			return err
		}
		out, err = s.getJob(ctx, tx, id)
		return err
	})
	return out, err
}

const (
	artInsertCols = "id, exp_id, path, artifact_type, status, reason, message, version, created_at, updated_at"
	artCols       = "seq, " + artInsertCols + ", file_count, byte_count, index_complete, indexed_at"
)

func (s *Store) artArgs(a *store.Artifact) []any {
	return []any{
		a.ID, a.ExpID, a.Path, a.ArtifactType, string(a.Status), a.Reason, a.Message, a.Version,
		s.d.timeArg(a.CreatedAt), s.d.timeArg(a.UpdatedAt),
	}
}

func scanArt(sc scanner) (*store.Artifact, int64, error) {
	var a store.Artifact
	var seq int64
	err := sc.Scan(&seq, &a.ID, &a.ExpID, &a.Path, &a.ArtifactType, &a.Status, &a.Reason, &a.Message, &a.Version,
		timeCol{&a.CreatedAt}, timeCol{&a.UpdatedAt}, &a.Index.Files, &a.Index.Bytes, &a.Index.Complete, nullTimeCol{&a.Index.At})
	return &a, seq, err
}

// GetArtifact implements store.Store.
func (s *Store) GetArtifact(ctx context.Context, id string) (*store.Artifact, error) {
	return s.getArt(ctx, s.reads, id)
}

func (s *Store) getArt(ctx context.Context, q querier, id string) (*store.Artifact, error) {
	a, _, err := scanArt(q.QueryRowContext(ctx, "SELECT "+artCols+" FROM artifacts WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("artifact", id)
	}
	if err != nil {
		return nil, dbErr("get artifact", err)
	}
	return a, nil
}

// ListArtifacts implements store.Store: oldest first.
func (s *Store) ListArtifacts(ctx context.Context, f store.ArtifactFilter) ([]*store.Artifact, string, error) {
	var c conds
	col := s.d.keyed(f.ExpID != "" || len(f.ExpIDs) > 0)
	c.eq("exp_id", f.ExpID)
	c.in("exp_id", f.ExpIDs)
	c.in(col("status"), statusStrings(f.Statuses))
	return listPage(ctx, s.reads, "artifacts", artCols, c, f.Page, false, scanArt)
}

// UpdateArtifactStatus implements store.Store.
func (s *Store) UpdateArtifactStatus(ctx context.Context, u store.StatusUpdate) (*store.Artifact, error) {
	if err := artOnly(u); err != nil {
		return nil, err
	}
	var out *store.Artifact
	err := s.updateStatus(ctx, artEntity, u, func(tx *sql.Tx) (err error) {
		out, err = s.getArt(ctx, tx, u.ID)
		return err
	})
	return out, err
}

// UpdateArtifactStatuses implements store.Store: every update in one
// transaction, each under its own precondition. Artifacts record no
// events, so, as for one update, no experiment's lock is taken.
func (s *Store) UpdateArtifactStatuses(ctx context.Context, us []store.StatusUpdate) (arts []*store.Artifact, errs []error, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		arts, errs = make([]*store.Artifact, len(us)), make([]error, len(us))
		for i, u := range us {
			errs[i] = artOnly(u)
		}
		return s.applyBatch(ctx, tx, artEntity, us, errs, func(i int) (err error) {
			arts[i], err = s.getArt(ctx, tx, us[i].ID)
			return err
		})
	})
	if err != nil {
		return nil, nil, err
	}
	return arts, errs, nil
}

// artOnly refuses what only a job's update may carry.
func artOnly(u store.StatusUpdate) error {
	if u.ClusterName != "" || u.NodePool != "" || u.Selection != "" {
		return errdefs.Invalid("cluster_name", "cluster_name, node_pool and selection apply to jobs only")
	}
	return nil
}

func statusStrings(ss []lifecycle.Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}
