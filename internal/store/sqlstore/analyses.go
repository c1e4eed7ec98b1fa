package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

const (
	anaInsertCols = "id, kind, exp_ids, params, status, message, summary, report_path, creator, creator_id, worker, " +
		"created_at, updated_at, claimed_at, started_at, finished_at"
	anaCols = "seq, " + anaInsertCols
)

func scanAnalysis(sc scanner) (*store.Analysis, error) {
	var a store.Analysis
	var seq int64
	err := sc.Scan(&seq, &a.ID, &a.Kind, jsonCol{&a.ExpIDs}, jsonCol{&a.Params}, &a.Status, &a.Message, &a.Summary,
		&a.ReportPath, &a.Creator, &a.CreatorID, &a.Worker, timeCol{&a.CreatedAt}, timeCol{&a.UpdatedAt},
		nullTimeCol{&a.ClaimedAt}, nullTimeCol{&a.StartedAt}, nullTimeCol{&a.FinishedAt})
	return &a, err
}

// CreateAnalysis implements store.Store: the analysis, Pending, and its
// index by experiment, in one transaction.
func (s *Store) CreateAnalysis(ctx context.Context, a *store.Analysis) error {
	now := s.now()
	a.Status, a.CreatedAt, a.UpdatedAt = lifecycle.AnalysisMachine.Initial, now, now
	if a.Params == nil {
		a.Params = map[string]string{}
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, insertSQL("analyses", anaInsertCols),
			a.ID, a.Kind, jsonArg(a.ExpIDs), jsonArg(a.Params), string(a.Status), a.Message, a.Summary, a.ReportPath,
			a.Creator, a.CreatorID, a.Worker, s.d.timeArg(now), s.d.timeArg(now), nil, nil, nil); err != nil {
			if _, dup := uniqueViolation(err); dup {
				return fmt.Errorf("analysis %q: %w", a.ID, errdefs.ErrAlreadyExists)
			}
			return dbErr("insert analysis", err)
		}
		seen := map[string]bool{}
		for _, id := range a.ExpIDs {
			if seen[id] {
				continue
			}
			seen[id] = true
			if _, err := tx.ExecContext(ctx, "INSERT INTO analysis_exps (exp_id, analysis_id) VALUES (?, ?)", id, a.ID); err != nil {
				return dbErr("index analysis", err)
			}
		}
		return nil
	})
}

// GetAnalysis implements store.Store.
func (s *Store) GetAnalysis(ctx context.Context, id string) (*store.Analysis, error) {
	a, err := scanAnalysis(s.reads.QueryRowContext(ctx, "SELECT "+anaCols+" FROM analyses WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("analysis", id)
	}
	if err != nil {
		return nil, dbErr("get analysis", err)
	}
	return a, nil
}

// ListAnalyses implements store.Store: an experiment's analyses, newest
// first, at most 1000.
func (s *Store) ListAnalyses(ctx context.Context, expID string) ([]*store.Analysis, error) {
	rows, err := s.reads.QueryContext(ctx, "SELECT "+anaCols+" FROM analyses WHERE id IN (SELECT analysis_id FROM analysis_exps WHERE exp_id = ?) "+
		"ORDER BY seq DESC LIMIT 1000", expID)
	if err != nil {
		return nil, dbErr("list analyses", err)
	}
	defer rows.Close()
	var out []*store.Analysis
	for rows.Next() {
		a, err := scanAnalysis(rows)
		if err != nil {
			return nil, dbErr("list analyses", err)
		}
		out = append(out, a)
	}
	return out, dbErrOrNil("list analyses", rows.Err())
}

// ClaimAnalysis implements store.Store: the oldest Pending analysis, or
// the oldest Running one claimed before staleBefore (its controller
// stopped), becomes Running for worker. nil when there is none.
func (s *Store) ClaimAnalysis(ctx context.Context, worker string, staleBefore time.Time) (*store.Analysis, error) {
	// Nearly every call finds nothing (the analysis controller looks each
	// time anything changes): a plain read answers those without taking the
	// write lock, which on SQLite every other writer would queue behind.
	var one int
	err := s.reads.QueryRowContext(ctx, "SELECT 1 FROM analyses WHERE status = ? OR (status = ? AND claimed_at < ?) LIMIT 1",
		string(lifecycle.Pending), string(lifecycle.Running), s.d.timeArg(normTime(staleBefore))).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr("claim analysis", err)
	}
	var out *store.Analysis
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		a, err := scanAnalysis(tx.QueryRowContext(ctx, "SELECT "+anaCols+" FROM analyses WHERE status = ? OR (status = ? AND claimed_at < ?) ORDER BY seq LIMIT 1"+s.d.forUpdate,
			string(lifecycle.Pending), string(lifecycle.Running), s.d.timeArg(normTime(staleBefore))))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return dbErr("claim analysis", err)
		}
		now := s.now()
		res, err := tx.ExecContext(ctx, "UPDATE analyses SET status = ?, worker = ?, claimed_at = ?, started_at = COALESCE(started_at, ?), updated_at = ? "+
			"WHERE id = ? AND status = ? AND (claimed_at IS NULL OR claimed_at = ?)",
			string(lifecycle.Running), worker, s.d.timeArg(now), s.d.timeArg(now), s.d.timeArg(now), a.ID, string(a.Status), s.d.timePtrArg(a.ClaimedAt))
		if err != nil {
			return dbErr("claim analysis", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil // another worker took it between the read and the write
		}
		a.Status, a.Worker, a.ClaimedAt, a.UpdatedAt = lifecycle.Running, worker, &now, now
		if a.StartedAt == nil {
			a.StartedAt = &now
		}
		out = a
		return nil
	})
	return out, err
}

// FinishAnalysis implements store.Store: a Running analysis ends with
// status; FailedPrecondition if it is not Running, or another worker than
// worker (when named) holds it.
func (s *Store) FinishAnalysis(ctx context.Context, id, worker string, status lifecycle.Status, message, summary, reportPath string) (*store.Analysis, error) {
	if err := lifecycle.AnalysisMachine.Check(lifecycle.Running, status); err != nil || !lifecycle.AnalysisMachine.IsTerminal(status) {
		return nil, errdefs.Invalid("status", "must be Succeeded or Failed, got %q", status)
	}
	if len(summary) > store.MaxAnalysisSummary {
		return nil, errdefs.Invalid("summary", "is %d bytes, the limit is %d: keep the full result in the report", len(summary), store.MaxAnalysisSummary)
	}
	now := s.now()
	res, err := s.wdb.ExecContext(ctx, "UPDATE analyses SET status = ?, message = ?, summary = ?, report_path = ?, finished_at = ?, updated_at = ? WHERE id = ? AND status = ? AND (? = '' OR worker = ?)",
		string(status), message, summary, reportPath, s.d.timeArg(now), s.d.timeArg(now), id, string(lifecycle.Running), worker, worker)
	if err != nil {
		return nil, dbErr("finish analysis", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		a, err := s.GetAnalysis(ctx, id)
		if err != nil {
			return nil, err
		}
		if a.Status == lifecycle.Running {
			return nil, errdefs.Precondition("analysis %s was given to %s, not %s (its claim had gone stale)", id, a.Worker, worker)
		}
		return nil, errdefs.Precondition("analysis %s is %s, not Running", id, a.Status)
	}
	return s.GetAnalysis(ctx, id)
}
