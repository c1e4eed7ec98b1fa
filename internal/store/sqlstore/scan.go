package sqlstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// timeCol scans a timestamp from either backend: MySQL returns time.Time
// (parseTime=true, UTC), SQLite the text written by timeArg.
type timeCol struct{ dst *time.Time }

func (c timeCol) Scan(src any) error {
	t, ok, err := parseTimeSrc(src)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("unexpected NULL timestamp")
	}
	*c.dst = t
	return nil
}

// nullTimeCol scans a nullable timestamp into a *time.Time.
type nullTimeCol struct{ dst **time.Time }

func (c nullTimeCol) Scan(src any) error {
	t, ok, err := parseTimeSrc(src)
	if err != nil {
		return err
	}
	*c.dst = nil
	if ok {
		*c.dst = &t
	}
	return nil
}

func parseTimeSrc(src any) (t time.Time, ok bool, err error) {
	switch v := src.(type) {
	case nil:
		return time.Time{}, false, nil
	case time.Time:
		return normTime(v), true, nil
	case string:
		return parseTimeText(v)
	case []byte:
		return parseTimeText(string(v))
	}
	return time.Time{}, false, fmt.Errorf("cannot scan %T into a timestamp", src)
}

func parseTimeText(s string) (time.Time, bool, error) {
	t, err := time.Parse(sqliteTimeLayout, s)
	if err != nil {
		// Tolerate rows written by hand (sqlite3 CLI, a fixture) in any
		// RFC 3339 form.
		t, err = time.Parse(time.RFC3339Nano, s)
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("bad timestamp %q: %w", s, err)
	}
	return normTime(t), true, nil
}

// nullStrCol scans a nullable text column; NULL is "".
type nullStrCol struct{ dst *string }

func (c nullStrCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.dst = ""
	case string:
		*c.dst = v
	case []byte:
		*c.dst = string(v)
	default:
		return fmt.Errorf("cannot scan %T as text", src)
	}
	return nil
}

// nullStrArg stores "" as NULL, so rows without a value take no space.
func nullStrArg(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// jsonCol scans a JSON text column into dst (a pointer).
type jsonCol struct{ dst any }

func (c jsonCol) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("cannot scan %T as JSON", src)
	}
	return json.Unmarshal(b, c.dst)
}

// jsonArg encodes v for a JSON text column. The types stored are plain
// slices, maps and structs, which always marshal.
func jsonArg(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("sqlstore: marshal %T: %v", v, err))
	}
	return string(b)
}

// insertSQL is "INSERT INTO table (cols) VALUES (?, ...)", one marker per
// column of the comma-separated cols.
func insertSQL(table, cols string) string {
	return "INSERT INTO " + table + " (" + cols + ") VALUES " + placeholders(numCols(cols))
}

func numCols(cols string) int { return strings.Count(cols, ",") + 1 }

// placeholders returns "(?, ?, ...)" with n markers.
func placeholders(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

// nullIfEmpty stores "" as NULL, for columns where NULL means absent.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
