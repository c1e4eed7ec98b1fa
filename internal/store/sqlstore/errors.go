package sqlstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/falconhq/falcon/internal/errdefs"
)

// MySQL server error numbers the store reacts to.
const (
	mysqlDupEntry    = 1062
	mysqlDataTooLong = 1406
	mysqlDeadlock    = 1213
)

// uniqueViolation reports whether err is a duplicate key, and on which
// column: "PRIMARY" for a primary key, else the column of the unique key.
// Callers turn it into ErrAlreadyExists naming the value, which neither
// driver's message does portably.
func uniqueViolation(err error) (column string, ok bool) {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == mysqlDupEntry {
		// MariaDB: "Duplicate entry 'x' for key 'name'"; MySQL 8 qualifies
		// the key: "... for key 'experiments.name'". Unique keys are named
		// after their column (see the migrations).
		_, key, _ := cutLast(me.Message, "for key '")
		key = strings.TrimSuffix(key, "'")
		if _, k, ok := cutLast(key, "."); ok {
			key = k
		}
		return key, true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return "PRIMARY", true
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			// "UNIQUE constraint failed: experiments.name (2067)"
			_, cols, _ := cutLast(se.Error(), "failed: ")
			col, _, _ := strings.Cut(cols, " ")
			col, _, _ = strings.Cut(col, ",")
			if _, c, ok := cutLast(col, "."); ok {
				col = c
			}
			return col, true
		}
	}
	return "", false
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == mysqlDeadlock
}

// dbErr wraps an unexpected database error with what the store was doing,
// turning the few the caller can act on into errdefs kinds.
func dbErr(op string, err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == mysqlDataTooLong {
		// "Data too long for column 'name' at row 1"
		col := me.Message
		if _, after, ok := strings.Cut(col, "column '"); ok {
			col, _, _ = strings.Cut(after, "'")
		}
		return errdefs.Invalid(col, "is too long to store")
	}
	return fmt.Errorf("sqlstore: %s: %w", op, err)
}
