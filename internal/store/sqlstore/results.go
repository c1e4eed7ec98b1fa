package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
)

// rowsPerInsert bounds a multi-row INSERT: well under SQLite's 32,766
// variables and MySQL's max_allowed_packet for 1 KiB paths.
const rowsPerInsert = 200

// SyncArtifactFiles implements store.Store.
func (s *Store) SyncArtifactFiles(ctx context.Context, artifactID string, upsert []store.ArtifactFile, remove []string, idx store.ArtifactIndex) error {
	upsertTail := " ON CONFLICT (artifact_id, path) DO UPDATE SET size = excluded.size, checksum = excluded.checksum, updated = excluded.updated"
	if s.d.isMySQL() {
		upsertTail = " ON DUPLICATE KEY UPDATE size = VALUES(size), checksum = VALUES(checksum), updated = VALUES(updated)"
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE artifacts SET file_count = ?, byte_count = ?, index_complete = ?, indexed_at = ? WHERE id = ?",
			idx.Files, idx.Bytes, idx.Complete, s.d.timePtrArg(idx.At), artifactID)
		if err != nil {
			return dbErr("index artifact", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			// MySQL counts only changed rows: tell "unchanged" from "absent".
			if _, err := s.getArt(ctx, tx, artifactID); err != nil {
				return err
			}
		}
		for len(upsert) > 0 {
			n := min(len(upsert), rowsPerInsert)
			var b strings.Builder
			args := make([]any, 0, n*5)
			b.WriteString("INSERT INTO artifact_files (artifact_id, path, size, checksum, updated) VALUES ")
			for i, f := range upsert[:n] {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, ?, ?, ?)")
				args = append(args, artifactID, f.Path, f.Size, f.Checksum, s.d.timeArg(f.Updated))
			}
			b.WriteString(upsertTail)
			if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
				return dbErr("index artifact files", err)
			}
			upsert = upsert[n:]
		}
		for len(remove) > 0 {
			n := min(len(remove), rowsPerInsert)
			args := make([]any, 0, n+1)
			args = append(args, artifactID)
			for _, p := range remove[:n] {
				args = append(args, p)
			}
			q := "DELETE FROM artifact_files WHERE artifact_id = ? AND path IN " + placeholders(n)
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return dbErr("unindex artifact files", err)
			}
			remove = remove[n:]
		}
		return nil
	})
}

// ListArtifactFiles implements store.Store. Pages continue after a path
// (keyset on the primary key), so a page costs the same at any depth.
func (s *Store) ListArtifactFiles(ctx context.Context, f store.ArtifactFileFilter) ([]store.ArtifactFile, string, error) {
	limit := f.Limit
	switch {
	case limit < 0:
		return nil, "", errdefs.Invalid("page_size", "must not be negative, got %d", limit)
	case limit == 0 || limit > maxPageSize:
		limit = maxPageSize
	}
	var c conds
	c.add("artifact_id = ?", f.ArtifactID)
	if f.Prefix != "" {
		c.add("path >= ?", f.Prefix)
		if hi, ok := prefixEnd(f.Prefix); ok {
			c.add("path < ?", hi)
		}
	}
	if f.After != "" {
		c.add("path > ?", f.After)
	}
	if !f.Hidden {
		// Not LIKE: '_' and '%' would need escaping, and the range is
		// what the primary key answers.
		c.add("NOT (path >= ? AND path < ?)", ".falcon/", ".falcon0")
	}
	rows, err := s.reads.QueryContext(ctx, "SELECT path, size, checksum, updated FROM artifact_files"+c.sql()+" ORDER BY path LIMIT ?",
		append(c.args, limit+1)...)
	if err != nil {
		return nil, "", dbErr("list artifact files", err)
	}
	defer rows.Close()
	var out []store.ArtifactFile
	for rows.Next() {
		var a store.ArtifactFile
		var path []byte
		if err := rows.Scan(&path, &a.Size, &a.Checksum, timeCol{&a.Updated}); err != nil {
			return nil, "", dbErr("list artifact files", err)
		}
		a.Path = string(path)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, "", dbErr("list artifact files", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].Path
	}
	return out, next, nil
}

// prefixEnd is the smallest string greater than every string starting with
// p: p with its last byte below 0xff incremented.
func prefixEnd(p string) (string, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// AppendMetrics implements store.Store.
func (s *Store) AppendMetrics(ctx context.Context, expID string, cur store.MetricCursor, points []store.MetricPoint) error {
	ignore, curTail := "INSERT OR IGNORE INTO", " ON CONFLICT (exp_id, source) DO UPDATE SET cursor_doc = excluded.cursor_doc, skipped = excluded.skipped, done = excluded.done, updated_at = excluded.updated_at"
	if s.d.isMySQL() {
		// INSERT IGNORE would also hide truncation; a duplicate key is the
		// only conflict these rows can have, and it must keep the first.
		ignore, curTail = "INSERT INTO", " ON DUPLICATE KEY UPDATE cursor_doc = VALUES(cursor_doc), skipped = VALUES(skipped), done = VALUES(done), updated_at = VALUES(updated_at)"
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.getExp(ctx, tx, expID, ""); err != nil {
			return err
		}
		for len(points) > 0 {
			n := min(len(points), rowsPerInsert)
			var b strings.Builder
			args := make([]any, 0, n*6)
			b.WriteString(ignore + " metric_points (exp_id, name, source, ord, step, value) VALUES ")
			for i, p := range points[:n] {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, ?, ?, ?, ?)")
				args = append(args, expID, p.Name, p.Source, p.Ord, p.Step, p.Value)
			}
			if s.d.isMySQL() {
				b.WriteString(" ON DUPLICATE KEY UPDATE ord = ord")
			}
			if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
				return dbErr("store metrics", err)
			}
			points = points[n:]
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO metric_cursors (exp_id, source, cursor_doc, skipped, done, updated_at) VALUES (?, ?, ?, ?, ?, ?)"+curTail,
			expID, cur.Source, cur.Doc, cur.Skipped, cur.Done, s.d.timeArg(s.now()))
		if err != nil {
			return dbErr("store metric cursor", err)
		}
		return nil
	})
}

// MetricCursors implements store.Store.
func (s *Store) MetricCursors(ctx context.Context, expID string) ([]store.MetricCursor, error) {
	rows, err := s.reads.QueryContext(ctx, "SELECT source, cursor_doc, skipped, done FROM metric_cursors WHERE exp_id = ? ORDER BY source", expID)
	if err != nil {
		return nil, dbErr("list metric cursors", err)
	}
	defer rows.Close()
	var out []store.MetricCursor
	for rows.Next() {
		var c store.MetricCursor
		if err := rows.Scan(&c.Source, &c.Doc, &c.Skipped, &c.Done); err != nil {
			return nil, dbErr("list metric cursors", err)
		}
		out = append(out, c)
	}
	return out, dbErrOrNil("list metric cursors", rows.Err())
}

// ListMetricPoints implements store.Store.
func (s *Store) ListMetricPoints(ctx context.Context, expID string, names []string) ([]store.MetricPoint, error) {
	var c conds
	c.add("exp_id = ?", expID)
	c.in("name", names)
	rows, err := s.reads.QueryContext(ctx, "SELECT name, source, ord, step, value FROM metric_points"+c.sql()+" ORDER BY name, source, ord", c.args...)
	if err != nil {
		return nil, dbErr("list metric points", err)
	}
	defer rows.Close()
	var out []store.MetricPoint
	for rows.Next() {
		var p store.MetricPoint
		if err := rows.Scan(&p.Name, &p.Source, &p.Ord, &p.Step, &p.Value); err != nil {
			return nil, dbErr("list metric points", err)
		}
		out = append(out, p)
	}
	return out, dbErrOrNil("list metric points", rows.Err())
}

func dbErrOrNil(op string, err error) error {
	if err == nil || errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	return dbErr(op, err)
}
