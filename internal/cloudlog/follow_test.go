package cloudlog_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/logging/apiv2/loggingpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	"github.com/falconhq/falcon/internal/cloudlog"
	"github.com/falconhq/falcon/internal/cloudlog/cloudlogtest"
)

// follower streams with follow in the background and hands each line to
// the test.
type follower struct {
	cancel context.CancelFunc
	lines  chan cloudlog.Line
	done   chan struct{} // closed when Stream has returned err
	err    error
}

func follow(t *testing.T, e *env, f cloudlog.Filter) *follower {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	fl := &follower{cancel: cancel, lines: make(chan cloudlog.Line, 1000), done: make(chan struct{})}
	go func() {
		defer close(fl.done)
		fl.err = e.r.Stream(ctx, target, f, true, func(l cloudlog.Line) error {
			fl.lines <- l
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-fl.done
	})
	return fl
}

// next waits for the next n lines.
func (fl *follower) next(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		select {
		case l := <-fl.lines:
			out = append(out, l.Text)
		case <-fl.done:
			t.Fatalf("stream ended after %q: %v", out, fl.err)
		}
	}
	return out
}

// stop ends the stream and checks that nothing more than what was taken
// came: no line given twice.
func (fl *follower) stop(t *testing.T) {
	t.Helper()
	fl.cancel()
	<-fl.done
	if !errors.Is(fl.err, context.Canceled) {
		t.Errorf("Stream returned %v, want context.Canceled", fl.err)
	}
	close(fl.lines)
	for l := range fl.lines {
		t.Errorf("extra line after the last expected: %q", l.Text)
	}
}

// signal is a channel closed the first time its function runs.
func signal() (chan struct{}, func()) {
	ch := make(chan struct{})
	var once sync.Once
	return ch, func() { once.Do(func() { close(ch) }) }
}

// Lines ingested while the listing ends and the tail begins are neither
// lost nor repeated: after the listing's last page (before the tail opens),
// as the tail opens (both the tail and the catch-up listing see them), and
// once the tail is open.
func TestFollowAcrossTheSeam(t *testing.T) {
	e := newEnv(t)
	e.srv.Append(rankLines(workload, 0, 10, false)...)
	all := rankLines(workload, 0, 20, false)
	_, listed := signal()
	var listOnce sync.Once
	e.srv.OnList(func(*loggingpb.ListLogEntriesRequest) {
		listOnce.Do(func() {
			e.srv.Append(all[10:13]...) // after the listing, before the tail
			listed()
		})
	})
	tailOpen, opened := signal()
	var tailOnce sync.Once
	e.srv.OnTail(func(*loggingpb.TailLogEntriesRequest) {
		tailOnce.Do(func() {
			e.srv.Append(all[13:15]...) // as the tail opens
			opened()
		})
	})

	fl := follow(t, e, cloudlog.Filter{})
	got := fl.next(t, 15)
	<-tailOpen
	e.srv.Append(all[15:20]...) // live
	got = append(got, fl.next(t, 5)...)
	if diff := cmp.Diff(expected(0, 0, 20), got); diff != "" {
		t.Errorf("followed lines (-want +got):\n%s", diff)
	}
	fl.stop(t)
}

// Cloud Logging ends tail sessions; the stream opens a new one and lines
// ingested between the two are caught up, once.
func TestFollowResumesWhenTheTailEnds(t *testing.T) {
	e := newEnv(t)
	all := rankLines(workload, 0, 10, false)
	e.srv.Append(all[:5]...)
	opens := make(chan struct{}, 10)
	e.srv.OnTail(func(*loggingpb.TailLogEntriesRequest) { opens <- struct{}{} })

	fl := follow(t, e, cloudlog.Filter{})
	got := fl.next(t, 5)
	<-opens
	e.srv.Append(all[5:7]...)
	got = append(got, fl.next(t, 2)...)
	e.srv.EndTails()
	e.srv.Append(all[7]) // while no session may be open
	<-opens
	got = append(got, fl.next(t, 1)...)
	e.srv.Append(all[8:]...)
	got = append(got, fl.next(t, 2)...)
	if diff := cmp.Diff(expected(0, 0, 10), got); diff != "" {
		t.Errorf("followed lines (-want +got):\n%s", diff)
	}
	if n := e.srv.Calls(cloudlogtest.TailLogEntries); n != 2 {
		t.Errorf("%d tail sessions, want 2", n)
	}
	fl.stop(t)
}

// A followed tail gives the last lines and then new ones, never the older
// lines the tail left out.
func TestFollowAfterATail(t *testing.T) {
	e := newEnv(t)
	all := rankLines(workload, 0, 12, false)
	e.srv.Append(all[:10]...)
	opens := make(chan struct{}, 10)
	e.srv.OnTail(func(*loggingpb.TailLogEntriesRequest) { opens <- struct{}{} })

	fl := follow(t, e, cloudlog.Filter{Ranks: []int{0}, Tail: 2})
	got := fl.next(t, 2)
	<-opens
	e.srv.Append(all[10:]...)
	got = append(got, fl.next(t, 2)...)
	if diff := cmp.Diff(expected(0, 8, 12), got); diff != "" {
		t.Errorf("followed tail (-want +got):\n%s", diff)
	}
	fl.stop(t)
}

// Grep and ranks apply to the followed part too: the tail is opened with
// the same filter.
func TestFollowKeepsTheFilter(t *testing.T) {
	e := newEnv(t)
	opens := make(chan struct{}, 10)
	e.srv.OnTail(func(*loggingpb.TailLogEntriesRequest) { opens <- struct{}{} })
	fl := follow(t, e, cloudlog.Filter{Ranks: []int{1}, Grep: "step_time"})
	<-opens
	for rank := range 2 {
		e.srv.Append(rankLines(workload, rank, 21, false)...)
	}
	got := fl.next(t, 3)
	if diff := cmp.Diff([]string{text(1, 0), text(1, 10), text(1, 20)}, got); diff != "" {
		t.Errorf("followed lines (-want +got):\n%s", diff)
	}
	fl.stop(t)
}

func TestFollowFailsWithARetrievalError(t *testing.T) {
	e := newEnv(t)
	e.srv.Append(rankLines(workload, 0, 3, false)...)
	e.srv.Fail(cloudlogtest.TailLogEntries, codes.PermissionDenied, -1)
	n := 0
	err := e.r.Stream(context.Background(), target, cloudlog.Filter{}, true, func(cloudlog.Line) error {
		n++
		return nil
	})
	var re *cloudlog.RetrievalError
	if !errors.As(err, &re) || re.Op != "tail" || re.Kind != cloudlog.KindPermissionDenied {
		t.Fatalf("error = %v, want a permission-denied RetrievalError of the tail", err)
	}
	if n != 3 {
		t.Errorf("got %d lines before the failure, want the 3 listed", n)
	}
}

func TestFollowRefusesUntil(t *testing.T) {
	e := newEnv(t)
	err := e.r.Stream(context.Background(), target, cloudlog.Filter{Until: t0}, true, func(cloudlog.Line) error { return nil })
	if diff := cmp.Diff([]string{"until"}, fields(err)); diff != "" {
		t.Errorf("fields named (-want +got):\n%s", diff)
	}
}
