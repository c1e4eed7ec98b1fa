// Package since reads the --since flag every command that looks back in
// time takes (exp logs, exp logs export, sim --from-db): a duration back
// from now, in Go's units with d for days (10m, 36h, 7d, 1d12h), or an RFC
// 3339 time.
package since

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Parse reads v as --since, relative to now.
func Parse(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := parseDays(v)
	if err != nil {
		return time.Time{}, errdefs.Invalid("--since", "%q is neither a duration (10m, 36h, 7d) nor an RFC 3339 time (2026-12-01T10:00:00Z)", v)
	}
	if d <= 0 {
		return time.Time{}, errdefs.Invalid("--since", "the duration must be positive, got %s", v)
	}
	return now.Add(-d), nil
}

// parseDays is time.ParseDuration with a leading whole number of days.
func parseDays(v string) (time.Duration, error) {
	days, rest, ok := strings.Cut(v, "d")
	if !ok {
		return time.ParseDuration(v)
	}
	n, err := strconv.Atoi(days)
	if err != nil || n < 0 || n > 100000 {
		return 0, fmt.Errorf("bad days %q", days)
	}
	d := time.Duration(n) * 24 * time.Hour
	if rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil {
			return 0, err
		}
		d += r
	}
	return d, nil
}
