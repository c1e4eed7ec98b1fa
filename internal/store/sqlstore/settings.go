package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/falconhq/falcon/internal/errdefs"
)

// RegistrySetting implements store.Store.
func (s *Store) RegistrySetting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.reads.QueryRowContext(ctx, "SELECT value FROM registry_settings WHERE name = ?", name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", dbErr("read registry setting", err)
	}
	return v, nil
}

// PutRegistrySetting implements store.Store. Delete-then-insert, as
// PutClusterReport, so both dialects share one statement each.
func (s *Store) PutRegistrySetting(ctx context.Context, name, value string) error {
	if name == "" {
		return errdefs.Invalid("name", "is required")
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM registry_settings WHERE name = ?", name); err != nil {
			return dbErr("put registry setting", err)
		}
		if value == "" {
			return nil
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO registry_settings (name, value) VALUES (?, ?)", name, value); err != nil {
			return dbErr("put registry setting", err)
		}
		return nil
	})
}
