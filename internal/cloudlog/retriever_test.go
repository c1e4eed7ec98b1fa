package cloudlog_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/falconhq/falcon/internal/cloudlog"
	"github.com/falconhq/falcon/internal/cloudlog/cloudlogtest"
	"github.com/falconhq/falcon/internal/errdefs"
)

// The tail of a long log is read from the newest end in pages no larger
// than the tail, so `--tail 100` of a 10,000-line rank moves 100 entries,
// not 10,000.
func TestTailReadsOnlyTheTail(t *testing.T) {
	e := newEnv(t)
	e.srv.Append(rankLines(workload, 0, 10000, false)...)
	e.srv.Append(rankLines(workload, 1, 10000, false)...)

	got, err := e.collect(t, cloudlog.Filter{Ranks: []int{0, 1}, Tail: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Both ranks' last three, merged in time order (rank 1 is 1ms later).
	want := []string{text(0, 9997), text(1, 9997), text(0, 9998), text(1, 9998), text(0, 9999), text(1, 9999)}
	if diff := cmp.Diff(want, texts(got)); diff != "" {
		t.Errorf("tail of two ranks (-want +got):\n%s", diff)
	}
	if served := e.srv.Served(); served != 6 {
		t.Errorf("the server sent %d entries for a tail of 3 lines of 2 ranks, want 6", served)
	}
}

func TestTailLongerThanAPage(t *testing.T) {
	e := newEnv(t, cloudlog.WithPageSize(7))
	e.srv.Append(rankLines(workload, 0, 100, false)...)
	got, err := e.collect(t, cloudlog.Filter{Ranks: []int{0}, Tail: 30})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(expected(0, 70, 100), texts(got)); diff != "" {
		t.Errorf("tail over several pages (-want +got):\n%s", diff)
	}
	if served := e.srv.Served(); served > 35 {
		t.Errorf("served %d entries for a tail of 30 in pages of 7, want at most 35", served)
	}
}

// Without Ranks, a tail is per rank and needs the ranks first.
func TestTailOfEveryRank(t *testing.T) {
	e := newEnv(t)
	for rank := range 3 {
		e.srv.Append(rankLines(workload, rank, 50, false)...)
	}
	got, err := e.collect(t, cloudlog.Filter{Tail: 1})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{text(0, 49), text(1, 49), text(2, 49)}, texts(got)); diff != "" {
		t.Errorf("last line of every rank (-want +got):\n%s", diff)
	}
}

func TestStreamEveryRankMergesInTimeOrder(t *testing.T) {
	e := newEnv(t, cloudlog.WithPageSize(5))
	for rank := range 3 {
		e.srv.Append(rankLines(workload, rank, 20, false)...)
	}
	e.srv.Append(noise()...)
	got, err := e.collect(t, cloudlog.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 20 {
		for rank := range 3 {
			want = append(want, text(rank, i))
		}
	}
	if diff := cmp.Diff(want, texts(got)); diff != "" {
		t.Errorf("all ranks (-want +got):\n%s", diff)
	}
}

func TestGrepIsRE2AndRefusedBeforeAnyCall(t *testing.T) {
	e := newEnv(t)
	e.srv.Append(rankLines(workload, 0, 100, false)...)

	got, err := e.collect(t, cloudlog.Filter{Grep: `^step [0-9]+ step_time: 0\.0[0-4]0`})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{text(0, 0), text(0, 10), text(0, 20), text(0, 30), text(0, 40)}, texts(got)); diff != "" {
		t.Errorf("RE2 grep (-want +got):\n%s", diff)
	}

	calls := e.srv.Calls(cloudlogtest.ListLogEntries)
	_, err = e.collect(t, cloudlog.Filter{Grep: "step_time(?!x)"})
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.HasPrefix(err.Error(), "grep: ") {
		t.Errorf("error = %v, want an invalid argument naming grep", err)
	}
	if n := e.srv.Calls(cloudlogtest.ListLogEntries) - calls; n != 0 {
		t.Errorf("an invalid grep made %d calls to Cloud Logging, want none", n)
	}
}

// GKE puts a structured (JSON) line's text in jsonPayload.message; grep and
// the line's text use it.
func TestJSONLines(t *testing.T) {
	e := newEnv(t)
	e.srv.Append(
		workload.JSONEntry(workload.Pod(0), 0, lineAt(0, 0), "step_time: 0.5"),
		workload.JSONEntry(workload.Pod(0), 0, lineAt(0, 1), "loading"),
		workload.Entry(workload.Pod(0), 0, lineAt(0, 2), "step_time: 0.4\n"),
	)
	got, err := e.collect(t, cloudlog.Filter{Grep: "step_time"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"step_time: 0.5", "step_time: 0.4"}, texts(got)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

// Ranks come from the completion-index label; a pod without it is known by
// its name, <job>-<index>-<suffix>; one whose name does not tell (but whose
// label does) is still found, and lines of neither kind are not a rank.
func TestRankDiscovery(t *testing.T) {
	e := newEnv(t, cloudlog.WithCallOptions(gax.WithRetry(nil)))
	e.srv.Append(rankLines(workload, 0, 5, false)...)
	e.srv.Append(rankLines(workload, 1, 5, true)...) // no label: by pod name
	e.srv.Append(rankLines(workload, 7, 5, true)...)
	e.srv.Append(workload.Entry("renamed-pod", 4, lineAt(4, 0), "label only"))
	e.srv.Append(workload.Entry("sidecar-without-rank", -1, lineAt(0, 1), "neither"))
	// Rank 3's pod restarted: two pods, one rank.
	e.srv.Append(workload.Entry(workload.Job+"-3-aaaaa", 3, lineAt(3, 0), "first try"))
	e.srv.Append(workload.Entry(workload.Job+"-3-bbbbb", 3, lineAt(3, 1), "second try"))
	e.srv.Append(noise()...)

	ranks, err := e.r.Ranks(context.Background(), target, cloudlog.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{0, 1, 3, 4, 7}, ranks); diff != "" {
		t.Errorf("ranks (-want +got):\n%s", diff)
	}
	// One single-entry query per rank or odd pod, and one that finds none:
	// never a read of the whole log.
	if served := e.srv.Served(); served > 7 {
		t.Errorf("discovery read %d entries, want at most one per pod", served)
	}

	got, err := e.collect(t, cloudlog.Filter{Ranks: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(expected(1, 0, 5), texts(got)); diff != "" {
		t.Errorf("rank 1 found by pod name (-want +got):\n%s", diff)
	}
	for _, l := range got {
		if l.Rank != 1 {
			t.Errorf("line %q: rank %d, want 1 from the pod name", l.Text, l.Rank)
		}
	}

	// The time window narrows discovery.
	late, err := e.r.Ranks(context.Background(), target, cloudlog.Filter{Since: lineAt(0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{0, 1, 7}, late); diff != "" {
		t.Errorf("ranks since line 2 (-want +got):\n%s", diff)
	}
}

func TestRanksOfAWorkloadWithoutLogs(t *testing.T) {
	e := newEnv(t)
	e.srv.Append(noise()...)
	ranks, err := e.r.Ranks(context.Background(), target, cloudlog.Filter{})
	if err != nil || len(ranks) != 0 {
		t.Errorf("Ranks = %v, %v; want none, no error", ranks, err)
	}
}

// Every gRPC code Cloud Logging may answer becomes a RetrievalError of a
// kind an operator can act on; the original status stays reachable.
func TestRetrievalErrors(t *testing.T) {
	for _, tc := range []struct {
		code      codes.Code
		kind      cloudlog.Kind
		retryable bool
		reason    string
	}{
		{codes.PermissionDenied, cloudlog.KindPermissionDenied, false, `roles/logging.viewer on project "falcon-prod"`},
		{codes.Unauthenticated, cloudlog.KindPermissionDenied, false, "roles/logging.viewer"},
		{codes.NotFound, cloudlog.KindNotFound, false, `project "falcon-prod"`},
		{codes.InvalidArgument, cloudlog.KindInvalidRequest, false, "refused the query"},
		{codes.ResourceExhausted, cloudlog.KindQuotaExhausted, true, "quota"},
		{codes.Unavailable, cloudlog.KindUnavailable, true, "unavailable"},
		{codes.DeadlineExceeded, cloudlog.KindUnavailable, true, "in time"},
		{codes.Internal, cloudlog.KindUnavailable, true, "unavailable"},
		{codes.Unimplemented, cloudlog.KindUnknown, false, "Cloud Logging failed"},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			e := newEnv(t, cloudlog.WithCallOptions(gax.WithRetry(nil)))
			e.srv.Append(rankLines(workload, 0, 3, false)...)
			e.srv.Fail(cloudlogtest.ListLogEntries, tc.code, -1)
			_, err := e.collect(t, cloudlog.Filter{Ranks: []int{0}})
			var re *cloudlog.RetrievalError
			if !errors.As(err, &re) {
				t.Fatalf("error = %v (%T), want a *cloudlog.RetrievalError", err, err)
			}
			if re.Kind != tc.kind || re.Retryable() != tc.retryable || re.Code != tc.code || re.Op != "list" {
				t.Errorf("got kind %q retryable %v code %v op %q; want %q %v %v list", re.Kind, re.Retryable(), re.Code, re.Op, tc.kind, tc.retryable, tc.code)
			}
			if !strings.Contains(re.Reason(), tc.reason) {
				t.Errorf("reason %q does not say %q", re.Reason(), tc.reason)
			}
			if status.Code(err) != tc.code {
				t.Errorf("status.Code through the RetrievalError = %v, want %v", status.Code(err), tc.code)
			}
			if !strings.Contains(err.Error(), "injected "+tc.code.String()) {
				t.Errorf("error %q lacks the original message", err)
			}
		})
	}
}

// With the client's default retry settings, a passing Unavailable is
// retried and never reaches the caller.
func TestTransientUnavailableIsRetriedByTheClient(t *testing.T) {
	e := newEnv(t)
	e.srv.Append(rankLines(workload, 0, 3, false)...)
	e.srv.Fail(cloudlogtest.ListLogEntries, codes.Unavailable, 1)
	got, err := e.collect(t, cloudlog.Filter{Ranks: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || e.srv.Calls(cloudlogtest.ListLogEntries) != 2 {
		t.Errorf("got %d lines in %d calls, want 3 in 2", len(got), e.srv.Calls(cloudlogtest.ListLogEntries))
	}
}

// A caller who hangs up gets its own context error, not a Cloud Logging
// failure to record against the experiment.
func TestCanceledIsNotARetrievalError(t *testing.T) {
	e := newEnv(t, cloudlog.WithPageSize(10))
	e.srv.Append(rankLines(workload, 0, 100, false)...)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := e.r.Stream(ctx, target, cloudlog.Filter{}, false, func(cloudlog.Line) error {
		n++
		if n == 1 {
			cancel()
		}
		return nil
	})
	var re *cloudlog.RetrievalError
	if errors.As(err, &re) || !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}

	stop := errors.New("enough")
	err = e.r.Stream(context.Background(), target, cloudlog.Filter{}, false, func(cloudlog.Line) error { return stop })
	if err != stop {
		t.Errorf("error = %v, want fn's own error", err)
	}
}
