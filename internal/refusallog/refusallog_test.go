package refusallog_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/refusallog"
	"github.com/falconhq/falcon/internal/store"
)

const (
	listExps  = "/falcon.v1.ExperimentService/ListExps"
	createExp = "/falcon.v1.ExperimentService/CreateExp"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// call is one refused call, at an offset from t0.
type call struct {
	at             time.Duration
	source, reason string
	method         string
}

func entry(at time.Duration, source, detail string, count int64) store.AuditEntry {
	return store.AuditEntry{At: t0.Add(at), Method: store.AuditUnauthenticated, Outcome: "Unauthenticated",
		Source: source, Detail: detail, Count: count}
}

func repeat(n int, c call) []call {
	out := make([]call, n)
	for i := range out {
		out[i] = c
		out[i].at += time.Duration(i) * time.Millisecond
	}
	return out
}

func TestLog(t *testing.T) {
	tests := []struct {
		name    string
		maxKeys int
		calls   []call
		take    time.Duration // Take(t0+take, false)
		want    []store.AuditEntry
	}{
		{
			name:  "many calls from one source in a minute are one entry",
			calls: repeat(250, call{5 * time.Second, "203.0.113.9", "malformed token", listExps}),
			take:  time.Minute,
			want:  []store.AuditEntry{entry(0, "203.0.113.9", "malformed token; methods: ListExps", 250)},
		},
		{
			name:  "nothing is taken before the minute ends",
			calls: repeat(3, call{0, "203.0.113.9", "malformed token", listExps}),
			take:  time.Minute - time.Nanosecond,
		},
		{
			name: "distinct reasons and sources are distinct entries",
			calls: append(append(repeat(2, call{0, "203.0.113.9", "malformed token", listExps}),
				repeat(3, call{time.Second, "203.0.113.9", "token expired", createExp})...),
				call{2 * time.Second, "198.51.100.7", "malformed token", listExps}),
			take: time.Minute,
			want: []store.AuditEntry{
				entry(0, "203.0.113.9", "malformed token; methods: ListExps", 2),
				entry(0, "203.0.113.9", "token expired; methods: CreateExp", 3),
				entry(0, "198.51.100.7", "malformed token; methods: ListExps", 1),
			},
		},
		{
			name: "each minute has its own entries",
			calls: append(repeat(2, call{50 * time.Second, "203.0.113.9", "malformed token", listExps}),
				repeat(4, call{70 * time.Second, "203.0.113.9", "malformed token", listExps})...),
			take: 2 * time.Minute,
			want: []store.AuditEntry{
				entry(0, "203.0.113.9", "malformed token; methods: ListExps", 2),
				entry(time.Minute, "203.0.113.9", "malformed token; methods: ListExps", 4),
			},
		},
		{
			name:    "pairs past the limit are counted in one other entry",
			maxKeys: 2,
			calls: func() []call {
				var cs []call
				for i := range 10 {
					cs = append(cs, repeat(3, call{time.Duration(i) * time.Second, fmt.Sprintf("192.0.2.%d", i), "malformed token", listExps})...)
				}
				return cs
			}(),
			take: time.Minute,
			want: []store.AuditEntry{
				entry(0, "192.0.2.0", "malformed token; methods: ListExps", 3),
				entry(0, "192.0.2.1", "malformed token; methods: ListExps", 3),
				entry(0, "other", "calls from 24 more sources and reasons, past the limit of 2 a window; methods: ListExps", 24),
			},
		},
		{
			name: "an entry names three methods at most",
			calls: []call{
				{0, "h", "r", "/s/A"}, {0, "h", "r", "/s/B"}, {0, "h", "r", "/s/A"}, {0, "h", "r", "/s/C"}, {0, "h", "r", "/s/D"},
			},
			take: time.Minute,
			want: []store.AuditEntry{entry(0, "h", "r; methods: A, B, C and others", 5)},
		},
		{
			name:  "a source as long as a caller likes is cut",
			calls: []call{{0, strings.Repeat("é", 1000), "r", listExps}, {0, strings.Repeat("é", 1000) + "x", "r", listExps}},
			take:  time.Minute,
			want:  []store.AuditEntry{entry(0, strings.Repeat("é", 127), "r; methods: ListExps", 2)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []refusallog.Option
			if tt.maxKeys > 0 {
				opts = append(opts, refusallog.WithMaxKeys(tt.maxKeys))
			}
			l := refusallog.New(opts...)
			for _, c := range tt.calls {
				l.Add(t0.Add(c.at), c.source, c.reason, c.method)
			}
			got := l.Take(t0.Add(tt.take), false)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Take (-want +got):\n%s", diff)
			}
		})
	}
}

// Add says when a window opens, so the server writes what ended and
// comes back when the new one ends; Take forgets what it returned; a
// stopping server takes the open window's calls so far.
func TestWindows(t *testing.T) {
	l := refusallog.New()
	if !l.Due().IsZero() {
		t.Errorf("Due of an empty log = %v", l.Due())
	}
	if !l.Add(t0.Add(10*time.Second), "h", "r", listExps) {
		t.Error("the first call did not open a window")
	}
	if l.Add(t0.Add(59*time.Second), "h", "r", listExps) {
		t.Error("a call in the open window opened another")
	}
	if got := l.Due(); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("Due = %v, want the end of the minute", got)
	}
	if !l.Add(t0.Add(61*time.Second), "h", "r", listExps) {
		t.Error("a call in the next minute did not open a window")
	}
	// Only the minute that ended comes out, once.
	if got := l.Take(t0.Add(62*time.Second), false); len(got) != 1 || got[0].Count != 2 || !got[0].At.Equal(t0) {
		t.Errorf("Take after a minute = %+v", got)
	}
	if got := l.Take(t0.Add(62*time.Second), false); len(got) != 0 {
		t.Errorf("Take again = %+v, want nothing", got)
	}
	// Stopping: the open minute's calls so far.
	l.Add(t0.Add(63*time.Second), "h", "r", listExps)
	want := []store.AuditEntry{entry(time.Minute, "h", "r; methods: ListExps", 2)}
	if diff := cmp.Diff(want, l.Take(t0.Add(64*time.Second), true)); diff != "" {
		t.Errorf("Take(all) (-want +got):\n%s", diff)
	}
	if !l.Due().IsZero() || len(l.Take(t0.Add(time.Hour), true)) != 0 {
		t.Error("the log is not empty after Take(all)")
	}
}

// However many distinct sources call, a window holds at most the limit of
// tallies plus one: memory is bounded by the limit, not by the callers.
func TestBounded(t *testing.T) {
	l := refusallog.New(refusallog.WithMaxKeys(100))
	for i := range 100_000 {
		l.Add(t0, fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255), "malformed token", listExps)
	}
	got := l.Take(t0, true)
	if len(got) != 101 || got[100].Source != "other" || got[100].Count != 100_000-100 {
		t.Fatalf("%d entries, last %+v", len(got), got[len(got)-1])
	}
}
