package sqlstore

import (
	"context"
	"fmt"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Schema says where the database's schema stands against this binary's
// migrations.
type Schema struct {
	Current int64 // newest migration applied to the database
	Latest  int64 // newest migration this binary carries
}

// Behind reports whether migrations are pending: this binary needs
// `falcon migrate` before it serves.
func (s Schema) Behind() bool { return s.Current < s.Latest }

// Ahead reports whether a newer binary migrated the database. Migrations
// only add, so an older server still works on it (a rollback).
func (s Schema) Ahead() bool { return s.Current > s.Latest }

// Schema compares the database's schema with this binary's migrations.
func (s *Store) Schema(ctx context.Context) (Schema, error) {
	p, err := s.migrations()
	if err != nil {
		return Schema{}, err
	}
	cur, err := p.GetDBVersion(ctx)
	if err != nil {
		return Schema{}, fmt.Errorf("sqlstore: schema version: %w", err)
	}
	var latest int64
	for _, src := range p.ListSources() {
		latest = max(latest, src.Version)
	}
	return Schema{Current: cur, Latest: latest}, nil
}

// Ping checks that the database answers, for readiness probes.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.wdb.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: database: %w", errdefs.ErrUnavailable, err)
	}
	return nil
}
