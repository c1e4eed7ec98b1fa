package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

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
	rows, err := s.reads.QueryContext(ctx, "SELECT user_id, email, created_at FROM users ORDER BY user_id")
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

// RelinkUser implements store.Store. The users table has no foreign keys
// pointing at it, and experiments.creator_id is the one column that names
// a user_id as an owner: jobs name their creator by email, which a relink
// keeps, and the audit log keeps who acted under which user_id then.
// Both rows are locked in the transaction, so a concurrent first request
// of the new identity waits for it and then finds the moved row.
func (s *Store) RelinkUser(ctx context.Context, email, newID string) (*store.UserRelink, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	var errs errdefs.FieldErrors
	if email == "" {
		errs.Add("email", "is required")
	}
	if newID == "" {
		errs.Add("user_id", "is required")
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	var out *store.UserRelink
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		u, err := scanUser(tx.QueryRowContext(ctx, "SELECT user_id, email, created_at FROM users WHERE email = ?"+s.d.forUpdate, email))
		if errors.Is(err, sql.ErrNoRows) {
			return errdefs.NotFoundf("email: no user is registered with %s", email)
		}
		if err != nil {
			return dbErr("get user", err)
		}
		out = &store.UserRelink{User: u, PreviousID: u.UserID}
		if u.UserID == newID {
			return nil
		}
		var holder sql.NullString
		err = tx.QueryRowContext(ctx, "SELECT email FROM users WHERE user_id = ?"+s.d.forUpdate, newID).Scan(&holder)
		switch {
		case err == nil:
			h := holder.String
			if h == "" {
				h = newID
			}
			return &store.UserIDTakenError{UserID: newID, Holder: h}
		case !errors.Is(err, sql.ErrNoRows):
			return dbErr("get user", err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE users SET user_id = ? WHERE user_id = ?", newID, u.UserID); err != nil {
			if _, dup := uniqueViolation(err); dup {
				// Registered between the check and the update.
				return &store.UserIDTakenError{UserID: newID}
			}
			return dbErr("relink user", err)
		}
		res, err := tx.ExecContext(ctx, "UPDATE experiments SET creator_id = ? WHERE creator_id = ?", newID, u.UserID)
		if err != nil {
			return dbErr("relink experiments", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return dbErr("relink experiments", err)
		}
		out = &store.UserRelink{
			User:       &store.User{UserID: newID, Email: u.Email, CreatedAt: u.CreatedAt},
			PreviousID: u.UserID, Experiments: n,
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
