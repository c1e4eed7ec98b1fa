package cloudlog

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	logging "cloud.google.com/go/logging/apiv2"
	"cloud.google.com/go/logging/apiv2/loggingpb"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Line is one line of a workload's log.
type Line struct {
	Rank     int       // job-completion index; -1 if neither label nor pod name tells it
	Pod      string    // the pod that printed it
	Time     time.Time // when the container printed it
	Text     string    // the line, without its trailing newline
	InsertID string    // Cloud Logging's ID of the entry; with Time, a cursor to resume after
}

// Retriever reads workloads' container logs from Cloud Logging. It is 001's
// CloudLogRetriever. It is safe for concurrent use.
type Retriever struct {
	client     *logging.Client
	pageSize   int
	now        func() time.Time
	lateness   time.Duration
	callOpts   []gax.CallOption
	maxRetries int
}

// Option configures a Retriever.
type Option func(*Retriever)

// WithPageSize sets how many entries one ListLogEntries page holds, 1 to
// 1000 (the default, Cloud Logging's maximum: fewest round trips, and a page
// of entries is the most a stream holds in memory).
func WithPageSize(n int) Option {
	return func(r *Retriever) { r.pageSize = min(max(n, 1), 1000) }
}

// WithClock sets the clock that stamps exports.
func WithClock(now func() time.Time) Option { return func(r *Retriever) { r.now = now } }

// WithLateness sets how far before the last line already streamed a
// followed stream looks again when it (re)opens its tail, for entries that
// reached Cloud Logging late. Default 2s, Cloud Logging's own tail buffer.
func WithLateness(d time.Duration) Option { return func(r *Retriever) { r.lateness = max(d, 0) } }

// Lateness is how late an entry may be ingested after its timestamp and
// still be given (WithLateness): a follower of a workload that ended waits
// this long for its last lines before it stops.
func (r *Retriever) Lateness() time.Duration { return r.lateness }

// WithCallOptions adds options to every ListLogEntries call, after the
// client's defaults (which retry Unavailable, Internal and DeadlineExceeded
// with backoff for up to a minute). Tests pass gax.WithRetry(nil) to see a
// failure at once.
func WithCallOptions(opts ...gax.CallOption) Option {
	return func(r *Retriever) { r.callOpts = append(r.callOpts, opts...) }
}

// New connects to Cloud Logging with clientOpts: none in production
// (Application Default Credentials, Workload Identity on GKE; the service
// account needs roles/logging.viewer), an endpoint and no authentication
// against a test server.
func New(ctx context.Context, clientOpts []option.ClientOption, opts ...Option) (*Retriever, error) {
	c, err := logging.NewClient(ctx, clientOpts...)
	if err != nil {
		return nil, err
	}
	r := &Retriever{client: c, pageSize: 1000, now: time.Now, lateness: 2 * time.Second, maxRetries: 5}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// Close closes the connection to Cloud Logging.
func (r *Retriever) Close() error { return r.client.Close() }

// Stream calls fn with f's lines of t, oldest first, until they are all
// read; with follow, it then goes on with lines as they are ingested until
// ctx is done (it returns ctx.Err()) or fn fails (it returns fn's error).
//
// With f.Tail, only the last f.Tail lines of each rank are read, newest
// first from Cloud Logging in pages no larger than f.Tail, and then given in
// time order: Stream holds at most f.Tail lines per rank. Without it, Stream
// holds one page.
//
// Bad input is an errdefs field error; a failure of Cloud Logging is a
// *RetrievalError.
func (r *Retriever) Stream(ctx context.Context, t Target, f Filter, follow bool, fn func(Line) error) error {
	filter, err := BuildFilter(t, f)
	if err != nil {
		return err
	}
	if follow && !f.Until.IsZero() {
		// New lines are never before Until: following would wait forever.
		return errdefs.Invalid("until", "cannot be combined with follow")
	}
	var seen *seenSet
	emit := fn
	if follow {
		margin := r.lateness
		if f.Tail > 0 {
			// Looking back past the last line would bring back lines older
			// than the tail that were left out on purpose.
			margin = 0
		}
		seen = newSeenSet(margin)
		emit = func(l Line) error {
			seen.add(l.InsertID, l.Time, false)
			return fn(l)
		}
	}
	if f.Tail > 0 {
		err = r.streamTail(ctx, t, f, emit)
	} else {
		err = r.list(ctx, t, "list", -1, filter, false, r.pageSize, func(e *loggingpb.LogEntry) error {
			return emit(toLine(t.Workload, e))
		})
	}
	if err != nil || !follow {
		return err
	}
	return r.follow(ctx, t, filter, seen, fn)
}

// streamTail gives the last f.Tail lines of each rank, merged in time order.
func (r *Retriever) streamTail(ctx context.Context, t Target, f Filter, fn func(Line) error) error {
	ranks, err := r.selectedRanks(ctx, t, f)
	if err != nil {
		return err
	}
	var all []Line
	for _, rank := range ranks {
		lines, err := r.lastLines(ctx, t, f, rank)
		if err != nil {
			return err
		}
		all = append(all, lines...)
	}
	slices.SortStableFunc(all, compareLines)
	for _, l := range all {
		if err := fn(l); err != nil {
			return err
		}
	}
	return nil
}

// lastLines reads rank's last f.Tail lines newest first, asking for no more
// than it keeps, and returns them oldest first.
func (r *Retriever) lastLines(ctx context.Context, t Target, f Filter, rank int) ([]Line, error) {
	one := f
	one.Ranks = []int{rank}
	filter, err := BuildFilter(t, one)
	if err != nil {
		return nil, err
	}
	lines := make([]Line, 0, min(f.Tail, 4096))
	err = r.list(ctx, t, "list", rank, filter, true, min(f.Tail, r.pageSize), func(e *loggingpb.LogEntry) error {
		lines = append(lines, toLine(t.Workload, e))
		if len(lines) == f.Tail {
			return errStop
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(lines)
	return lines, nil
}

// selectedRanks is f.Ranks, or every rank found in Cloud Logging.
func (r *Retriever) selectedRanks(ctx context.Context, t Target, f Filter) ([]int, error) {
	if f.Ranks != nil {
		rs := slices.Clone(f.Ranks)
		slices.Sort(rs)
		return slices.Compact(rs), nil
	}
	return r.Ranks(ctx, t, f)
}

// Ranks finds the ranks that have lines in f's time window (f.Ranks, if
// set, narrows the answer; f.Grep and f.Tail do not). A rank is the pod's
// job-completion-index label or, on pods without it, the index in the pod
// name <workload>-<index>-<suffix>.
//
// Cloud Logging has no "distinct" query, so Ranks asks for one entry at a
// time, each query excluding the pods already found: n ranks cost n+1
// single-entry queries, whatever the size of the log.
func (r *Retriever) Ranks(ctx context.Context, t Target, f Filter) ([]int, error) {
	window := Filter{Ranks: f.Ranks, Since: f.Since, Until: f.Until}
	base, err := BuildFilter(t, window)
	if err != nil {
		return nil, err
	}
	found := map[int]bool{}
	var odd []string // pods the rank pattern does not exclude
	for {
		var b strings.Builder
		b.WriteString(base)
		var foundRE string
		if len(found) > 0 {
			foundRE = podPattern(t.Workload, rankGroup(found))
			b.WriteString(" AND resource.labels.pod_name!~" + quote(foundRE))
		}
		for _, p := range odd {
			b.WriteString(" AND resource.labels.pod_name!=" + quote(p))
		}
		if b.Len() > maxFilterLen {
			return nil, &RetrievalError{Op: "discover ranks", Project: t.Project, Rank: -1, Kind: KindInvalidRequest, Code: codes.OK,
				Err: errors.New("the workload has more pods than one Cloud Logging filter can tell apart; give the ranks explicitly")}
		}
		var first *loggingpb.LogEntry
		err := r.list(ctx, t, "discover ranks", -1, b.String(), false, 1, func(e *loggingpb.LogEntry) error {
			first = e
			return errStop
		})
		if err != nil {
			return nil, err
		}
		if first == nil {
			break
		}
		l := toLine(t.Workload, first)
		if l.Rank >= 0 {
			found[l.Rank] = true
		}
		// Every round must exclude the pod it found, or the next would find
		// it again: a pod whose name does not carry its rank is excluded by
		// name.
		if l.Rank < 0 || !matches(podPattern(t.Workload, rankGroup(found)), l.Pod) {
			odd = append(odd, l.Pod)
		}
	}
	ranks := make([]int, 0, len(found))
	for rank := range found {
		ranks = append(ranks, rank)
	}
	slices.Sort(ranks)
	return ranks, nil
}

// matches reports whether pattern, built by podPattern, matches s.
func matches(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

func rankGroup(ranks map[int]bool) string {
	rs := make([]int, 0, len(ranks))
	for r := range ranks {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	return strings.Join(s, "|")
}

// errStop ends a listing early without an error.
var errStop = errors.New("stop listing")

// list calls fn with each entry matching filter, oldest first (newest first
// with desc), one page in memory at a time. An error of fn is returned as
// is; a failure of Cloud Logging as a *RetrievalError for op and rank.
func (r *Retriever) list(ctx context.Context, t Target, op string, rank int, filter string, desc bool, pageSize int, fn func(*loggingpb.LogEntry) error) error {
	order := "timestamp asc"
	if desc {
		order = "timestamp desc"
	}
	it := r.client.ListLogEntries(ctx, &loggingpb.ListLogEntriesRequest{
		ResourceNames: []string{"projects/" + t.Project},
		Filter:        filter,
		OrderBy:       order,
		PageSize:      int32(pageSize),
	}, r.callOpts...)
	for {
		e, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return retrievalError(ctx, op, t.Project, rank, err)
		}
		if err := fn(e); err != nil {
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		}
	}
}

// toLine reads the rank, pod, time and text of a container log entry.
func toLine(workload string, e *loggingpb.LogEntry) Line {
	pod := e.GetResource().GetLabels()["pod_name"]
	return Line{
		Rank:     rankOf(workload, e.GetLabels()[CompletionIndexLabel], pod),
		Pod:      pod,
		Time:     e.GetTimestamp().AsTime(),
		Text:     textOf(e),
		InsertID: e.GetInsertId(),
	}
}

// rankOf is the completion-index label, else the index in an Indexed Job's
// pod name <workload>-<index>-<suffix>, else -1.
func rankOf(workload, label, pod string) int {
	if n, err := strconv.Atoi(label); err == nil && n >= 0 {
		return n
	}
	rest, ok := strings.CutPrefix(pod, workload+"-")
	if !ok {
		return -1
	}
	idx, _, ok := strings.Cut(rest, "-")
	if !ok {
		return -1
	}
	if n, err := strconv.Atoi(idx); err == nil && n >= 0 && strconv.Itoa(n) == idx {
		return n
	}
	return -1
}

// textOf is what the container printed: textPayload for a plain line, the
// "message" of a JSON line, else the whole JSON object.
func textOf(e *loggingpb.LogEntry) string {
	switch p := e.GetPayload().(type) {
	case *loggingpb.LogEntry_TextPayload:
		return strings.TrimSuffix(p.TextPayload, "\n")
	case *loggingpb.LogEntry_JsonPayload:
		if m, ok := p.JsonPayload.GetFields()["message"].GetKind().(*structpb.Value_StringValue); ok {
			return strings.TrimSuffix(m.StringValue, "\n")
		}
		b, err := protojson.Marshal(p.JsonPayload)
		if err != nil {
			return ""
		}
		return string(b)
	}
	return ""
}

func compareLines(a, b Line) int {
	if c := a.Time.Compare(b.Time); c != 0 {
		return c
	}
	return strings.Compare(a.InsertID, b.InsertID)
}
