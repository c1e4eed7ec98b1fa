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

const clusterCols = "id, name, backend, project, location, accelerator_types, gcs_bucket, default_reservation, status, created_at, spec"

func scanCluster(sc scanner) (*store.Cluster, error) {
	var c store.Cluster
	err := sc.Scan(&c.ID, &c.Name, &c.Backend, &c.Project, &c.Location, jsonCol{&c.AcceleratorTypes},
		&c.GCSBucket, &c.DefaultReservation, &c.Status, timeCol{&c.CreatedAt}, jsonCol{&c.Spec})
	return &c, err
}

// UpsertCluster implements store.Store. The name is the natural key (the
// cluster registry YAML names clusters, it does not number them), so an
// existing row keeps its ID and created_at; a new one needs c.ID.
func (s *Store) UpsertCluster(ctx context.Context, c *store.Cluster) (*store.Cluster, error) {
	if c == nil || c.Name == "" {
		return nil, errdefs.Invalid("name", "is required")
	}
	var out *store.Cluster
	upsert := func(tx *sql.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, "SELECT id FROM clusters WHERE name = ?"+s.d.forUpdate, c.Name).Scan(&id)
		switch {
		case err == nil:
			if _, err := tx.ExecContext(ctx, "UPDATE clusters SET backend = ?, project = ?, location = ?, "+
				"accelerator_types = ?, gcs_bucket = ?, default_reservation = ?, status = ?, spec = ? WHERE id = ?",
				c.Backend, c.Project, c.Location, jsonArg(c.AcceleratorTypes), c.GCSBucket, c.DefaultReservation,
				c.Status, jsonArg(c.Spec), id); err != nil {
				return dbErr("update cluster", err)
			}
		case errors.Is(err, sql.ErrNoRows):
			if c.ID == "" {
				return errdefs.Invalid("id", "is required for new cluster %q", c.Name)
			}
			id = c.ID
			created := c.CreatedAt
			if created.IsZero() {
				created = s.now()
			}
			if _, err := tx.ExecContext(ctx, insertSQL("clusters", clusterCols),
				c.ID, c.Name, c.Backend, c.Project, c.Location, jsonArg(c.AcceleratorTypes), c.GCSBucket,
				c.DefaultReservation, c.Status, s.d.timeArg(created), jsonArg(c.Spec)); err != nil {
				return dbErr("insert cluster", err)
			}
		default:
			return dbErr("upsert cluster", err)
		}
		out, err = scanCluster(tx.QueryRowContext(ctx, "SELECT "+clusterCols+" FROM clusters WHERE id = ?", id))
		if err != nil {
			return dbErr("upsert cluster", err)
		}
		return nil
	}
	// Two first upserts of one name can both see no row; the loser's insert
	// hits the unique name and, run again, finds the winner's row to update.
	for attempt := 1; ; attempt++ {
		err := s.inTx(ctx, upsert)
		col, dup := uniqueViolation(err)
		switch {
		case !dup:
			return out, err
		case col == "name" && attempt < 3:
			continue
		case col == "name":
			return nil, fmt.Errorf("cluster name %q: %w", c.Name, errdefs.ErrAlreadyExists)
		default:
			return nil, fmt.Errorf("cluster ID %q is taken by another cluster: %w", c.ID, errdefs.ErrAlreadyExists)
		}
	}
}

// GetCluster implements store.Store. A name wins over an ID should one
// cluster's name equal another's ID.
func (s *Store) GetCluster(ctx context.Context, nameOrID string) (*store.Cluster, error) {
	c, err := scanCluster(s.reads.QueryRowContext(ctx, "SELECT "+clusterCols+" FROM clusters WHERE name = ? OR id = ? "+
		"ORDER BY CASE WHEN name = ? THEN 0 ELSE 1 END LIMIT 1", nameOrID, nameOrID, nameOrID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("cluster", nameOrID)
	}
	if err != nil {
		return nil, dbErr("get cluster", err)
	}
	return c, nil
}

// ListClusters implements store.Store, by name.
func (s *Store) ListClusters(ctx context.Context) ([]*store.Cluster, error) {
	rows, err := s.reads.QueryContext(ctx, "SELECT "+clusterCols+" FROM clusters ORDER BY name")
	if err != nil {
		return nil, dbErr("list clusters", err)
	}
	defer rows.Close()
	var out []*store.Cluster
	for rows.Next() {
		c, err := scanCluster(rows)
		if err != nil {
			return nil, dbErr("list clusters", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list clusters", err)
	}
	return out, nil
}

// DeleteCluster implements store.Store. The check for live jobs and the
// delete share one transaction; a job dispatched to the cluster after the
// check is the resource manager's race to lose (it finds no cluster and
// fails the job), which is why callers take a cluster offline first.
func (s *Store) DeleteCluster(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, "SELECT id FROM clusters WHERE name = ?"+s.d.forUpdate, name).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return errdefs.NotFound("cluster", name)
		}
		if err != nil {
			return dbErr("delete cluster", err)
		}
		terminal := lifecycle.JobMachine.Terminal
		args := []any{name}
		for _, st := range terminal {
			args = append(args, st)
		}
		var live int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM jobs WHERE cluster_name = ? AND status NOT IN "+
			placeholders(len(terminal)), args...).Scan(&live); err != nil {
			return dbErr("delete cluster", err)
		}
		if live > 0 {
			return errdefs.Precondition("cluster %s has %d job(s) that have not finished; take it offline and delete it once they end", name, live)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM clusters WHERE id = ?", id); err != nil {
			return dbErr("delete cluster", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM cluster_reports WHERE cluster_name = ?", name); err != nil {
			return dbErr("delete cluster", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM cluster_probes WHERE cluster_name = ?", name); err != nil {
			return dbErr("delete cluster", err)
		}
		return nil
	})
}

// PutClusterReport implements store.Store. Delete-then-insert in one
// transaction is the portable upsert; reports are written a few times a
// minute per cluster, so its cost does not matter.
func (s *Store) PutClusterReport(ctx context.Context, name string, report []byte, at time.Time) error {
	if name == "" {
		return errdefs.Invalid("cluster_name", "is required")
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM clusters WHERE name = ?", name).Scan(&n); err != nil {
			return dbErr("put cluster report", err)
		}
		if n == 0 {
			return errdefs.NotFound("cluster", name)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM cluster_reports WHERE cluster_name = ?", name); err != nil {
			return dbErr("put cluster report", err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO cluster_reports (cluster_name, report, reported_at) VALUES (?, ?, ?)",
			name, string(report), s.d.timeArg(at)); err != nil {
			return dbErr("put cluster report", err)
		}
		return nil
	})
}

// GetClusterReport implements store.Store.
func (s *Store) GetClusterReport(ctx context.Context, name string) ([]byte, time.Time, error) {
	var report string
	var at time.Time
	err := s.reads.QueryRowContext(ctx, "SELECT report, reported_at FROM cluster_reports WHERE cluster_name = ?", name).Scan(&report, timeCol{&at})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, errdefs.NotFound("cluster report", name)
	}
	if err != nil {
		return nil, time.Time{}, dbErr("get cluster report", err)
	}
	return []byte(report), at, nil
}

// PutClusterProbes implements store.Store. Delete-then-insert per cluster,
// as PutClusterReport, in one transaction for the whole round of probes.
func (s *Store) PutClusterProbes(ctx context.Context, probes []store.ClusterProbe) error {
	if len(probes) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for _, p := range probes {
			if p.Cluster == "" {
				return errdefs.Invalid("cluster", "is required")
			}
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM clusters WHERE name = ?", p.Cluster).Scan(&n); err != nil {
				return dbErr("put cluster probes", err)
			}
			if n == 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, "DELETE FROM cluster_probes WHERE cluster_name = ?", p.Cluster); err != nil {
				return dbErr("put cluster probes", err)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO cluster_probes (cluster_name, reachable, queue_depth, running_count, error, probed_at) VALUES (?, ?, ?, ?, ?, ?)",
				p.Cluster, p.Reachable, intPtrArg(p.QueueDepth), intPtrArg(p.RunningCount), p.Error, s.d.timeArg(p.ProbedAt)); err != nil {
				return dbErr("put cluster probes", err)
			}
		}
		return nil
	})
}

// ListClusterProbes implements store.Store.
func (s *Store) ListClusterProbes(ctx context.Context) ([]store.ClusterProbe, error) {
	rows, err := s.reads.QueryContext(ctx, "SELECT cluster_name, reachable, queue_depth, running_count, error, probed_at FROM cluster_probes ORDER BY cluster_name")
	if err != nil {
		return nil, dbErr("list cluster probes", err)
	}
	defer rows.Close()
	var out []store.ClusterProbe
	for rows.Next() {
		var p store.ClusterProbe
		var queued, running sql.NullInt64
		if err := rows.Scan(&p.Cluster, &p.Reachable, &queued, &running, &p.Error, timeCol{&p.ProbedAt}); err != nil {
			return nil, dbErr("list cluster probes", err)
		}
		p.QueueDepth, p.RunningCount = nullInt(queued), nullInt(running)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list cluster probes", err)
	}
	return out, nil
}

func intPtrArg(v *int) any {
	if v == nil {
		return nil
	}
	return *v
}

func nullInt(v sql.NullInt64) *int {
	if !v.Valid {
		return nil
	}
	n := int(v.Int64)
	return &n
}
