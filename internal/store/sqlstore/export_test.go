package sqlstore

import "context"

// PageToken is the token that continues a list after the row with seq.
func PageToken(seq int64) string { return encodeToken(seq) }

// MigrateTo applies the embedded migrations up to version v, so a test can
// put rows in an older schema and watch a later migration convert them.
func (s *Store) MigrateTo(ctx context.Context, v int64) error {
	p, err := s.migrations()
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, v)
	return err
}

// Exec runs a statement on the write pool, to set up what the store's own
// methods would never write.
func (s *Store) Exec(ctx context.Context, q string, args ...any) error {
	_, err := s.wdb.ExecContext(ctx, q, args...)
	return err
}
