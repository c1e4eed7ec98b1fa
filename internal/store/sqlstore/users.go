package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
)

// EnsureUser implements store.Store. The insert does nothing when the
// user_id exists, so concurrent first requests of one user all succeed
// and leave one row; the row is then read back in the same transaction.
// An email already registered to a different user_id is ErrAlreadyExists.
func (s *Store) EnsureUser(ctx context.Context, u *store.User) (*store.User, error) {
	if u == nil || u.UserID == "" {
		return nil, errdefs.Invalid("user_id", "is required")
	}
	created := u.CreatedAt
	if created.IsZero() {
		created = s.now()
	}
	emailTaken := fmt.Errorf("email %q is registered to another user: %w", u.Email, errdefs.ErrAlreadyExists)
	var out *store.User
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO users (user_id, email, created_at) VALUES (?, ?, ?)"+s.d.userIfAbsent,
			u.UserID, nullIfEmpty(u.Email), s.d.timeArg(created)); err != nil {
			if _, dup := uniqueViolation(err); dup {
				return emailTaken
			}
			return dbErr("insert user", err)
		}
		var err error
		out, err = scanUser(tx.QueryRowContext(ctx, "SELECT user_id, email, created_at FROM users WHERE user_id = ?", u.UserID))
		if errors.Is(err, sql.ErrNoRows) {
			// MySQL's ON DUPLICATE KEY also skips a clash on email.
			return emailTaken
		}
		if err != nil {
			return dbErr("get user", err)
		}
		return nil
	})
	return out, err
}

func scanUser(sc scanner) (*store.User, error) {
	var u store.User
	var email sql.NullString
	err := sc.Scan(&u.UserID, &email, timeCol{&u.CreatedAt})
	u.Email = email.String
	return &u, err
}

// ListUsers implements store.Store, by user_id.
func (s *Store) ListUsers(ctx context.Context) ([]*store.User, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT user_id, email, created_at FROM users ORDER BY user_id")
	if err != nil {
		return nil, dbErr("list users", err)
	}
	defer rows.Close()
	var out []*store.User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, dbErr("list users", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list users", err)
	}
	return out, nil
}
