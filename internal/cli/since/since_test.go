package since

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 12, 8, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in      string
		want    time.Time
		wantErr string
	}{
		{in: "7d", want: now.Add(-7 * 24 * time.Hour)},
		{in: "1d12h", want: now.Add(-36 * time.Hour)},
		{in: "90m", want: now.Add(-90 * time.Minute)},
		{in: "2026-12-01T00:00:00Z", want: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{in: "2026-12-01T00:00:00.25+01:00", want: time.Date(2026, 11, 30, 23, 0, 0, 250e6, time.UTC)},
		{in: "a week", wantErr: `--since: "a week" is neither a duration (10m, 36h, 7d) nor an RFC 3339 time`},
		{in: "-2h", wantErr: "--since: the duration must be positive, got -2h"},
		{in: "0s", wantErr: "--since: the duration must be positive"},
	} {
		got, err := Parse(tc.in, now)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
