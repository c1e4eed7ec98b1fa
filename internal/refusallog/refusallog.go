package refusallog

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/falconhq/falcon/internal/store"
)

// Defaults of a Log.
const (
	// DefaultWindow is how long one entry counts: a minute.
	DefaultWindow = time.Minute
	// DefaultMaxKeys bounds the distinct (source, reason) pairs counted
	// apart in one window; calls past it are counted in the Other entry.
	DefaultMaxKeys = 1000
)

const (
	// Other is the Source of the entry that counts the calls past the
	// limit of distinct pairs in a window.
	Other = "other"
	// Outcome is every entry's outcome: the gRPC code the callers got.
	Outcome = "Unauthenticated"
	// maxMethods bounds the methods an entry names; the methods are the
	// server's own, so each name is short.
	maxMethods = 3
	// maxField is how much of a source or reason is kept (the audit log's
	// column width): a forwarded-for header can be as long as a caller
	// likes.
	maxField = 255
)

// Log counts refused calls. It is safe for concurrent use.
type Log struct {
	window  time.Duration
	maxKeys int

	mu      sync.Mutex
	start   time.Time // the open window's start; zero when none is open
	tallies map[key]*tally
	order   []key // first call first, so entries come out in a stable order
	other   tally
	dropped int // distinct pairs counted in other
	ended   []store.AuditEntry
}

type key struct{ source, reason string }

type tally struct {
	count       int64
	methods     []string
	moreMethods bool
}

// Option configures a Log.
type Option func(*Log)

// WithWindow sets how long one entry counts (DefaultWindow).
func WithWindow(d time.Duration) Option { return func(l *Log) { l.window = d } }

// WithMaxKeys sets how many distinct (source, reason) pairs a window counts
// apart (DefaultMaxKeys).
func WithMaxKeys(n int) Option { return func(l *Log) { l.maxKeys = n } }

// New returns an empty Log.
func New(opts ...Option) *Log {
	l := &Log{window: DefaultWindow, maxKeys: DefaultMaxKeys}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Add counts one call to method refused at now from source for reason.
// When now is past the open window, that window ends (its entries wait for
// Take) and a new one opens: opened reports it, so the caller knows to
// write what ended and to come back when the new window ends (Due).
func (l *Log) Add(now time.Time, source, reason, method string) (opened bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if start := now.Truncate(l.window); l.start.IsZero() || !start.Equal(l.start) {
		l.close()
		l.start, opened = start, true
	}
	k := key{source: cut(source), reason: cut(reason)}
	t, ok := l.tallies[k]
	switch {
	case ok:
	case len(l.tallies) < l.maxKeys:
		t = &tally{}
		l.tallies[k] = t
		l.order = append(l.order, k)
	default:
		t = &l.other
		l.dropped++
	}
	t.count++
	switch {
	case slices.Contains(t.methods, method):
	case len(t.methods) < maxMethods:
		t.methods = append(t.methods, method)
	default:
		t.moreMethods = true
	}
	return opened
}

// Due is when the open window ends; zero when none is open.
func (l *Log) Due() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.start.IsZero() {
		return time.Time{}
	}
	return l.start.Add(l.window)
}

// Take returns, oldest first, the entries of the windows that ended by now,
// and forgets them. With all it ends the open window too, as a server does
// when it stops: its entries then count the window's calls so far.
func (l *Log) Take(now time.Time, all bool) []store.AuditEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.start.IsZero() && (all || !now.Before(l.start.Add(l.window))) {
		l.close()
	}
	out := l.ended
	l.ended = nil
	return out
}

// close ends the open window, if any, turning its tallies into entries.
func (l *Log) close() {
	for _, k := range l.order {
		t := l.tallies[k]
		l.ended = append(l.ended, l.entry(k.source, k.reason, t))
	}
	if l.other.count > 0 {
		reason := fmt.Sprintf("calls from %d more sources and reasons, past the limit of %d a window", l.dropped, l.maxKeys)
		l.ended = append(l.ended, l.entry(Other, reason, &l.other))
	}
	l.start = time.Time{}
	l.tallies = map[key]*tally{}
	l.order = nil
	l.other = tally{}
	l.dropped = 0
}

func (l *Log) entry(source, reason string, t *tally) store.AuditEntry {
	names := make([]string, len(t.methods))
	for i, m := range t.methods {
		names[i] = m[strings.LastIndex(m, "/")+1:]
	}
	detail := reason + "; methods: " + strings.Join(names, ", ")
	if t.moreMethods {
		detail += " and others"
	}
	return store.AuditEntry{
		At: l.start, Method: store.AuditUnauthenticated, Outcome: Outcome,
		Detail: detail, Count: t.count, Source: source,
	}
}

// cut shortens s to at most maxField bytes without splitting a rune.
func cut(s string) string {
	if len(s) <= maxField {
		return s
	}
	n := maxField
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
