package sqlstore

import (
	"context"

	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

// CountLiveJobs counts jobs that have not ended by cluster, status and
// reason. Only live statuses are read, through the jobs_status_seq index,
// so the cost follows the jobs in flight, not the history.
func (s *Store) CountLiveJobs(ctx context.Context) ([]store.JobCount, error) {
	rows, err := s.reads.QueryContext(ctx, `SELECT cluster_name, status, reason, COUNT(*) FROM jobs
		WHERE status IN (?, ?, ?) GROUP BY cluster_name, status, reason`,
		string(lifecycle.Pending), string(lifecycle.Running), string(lifecycle.Aborting))
	if err != nil {
		return nil, dbErr("count live jobs", err)
	}
	defer rows.Close()
	var out []store.JobCount
	for rows.Next() {
		var c store.JobCount
		if err := rows.Scan(&c.Cluster, &c.Status, &c.Reason, &c.N); err != nil {
			return nil, dbErr("count live jobs", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("count live jobs", err)
	}
	return out, nil
}
