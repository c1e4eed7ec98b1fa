package expwatch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/client"
)

// fakeClock advances only when the watch sleeps.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

func ev(seq int64, status string) *falconv1.ExpEvent {
	return &falconv1.ExpEvent{Seq: seq, ExpId: "exp-1", Kind: "experiment", Id: "exp-1", Status: status}
}

// attempt is what one WatchExp call of the script does: send events, then
// end with err (nil: a clean close).
type attempt struct {
	send []*falconv1.ExpEvent
	err  codes.Code
}

func scripted(attempts ...attempt) *clitest.API {
	var mu sync.Mutex
	i := 0
	return &clitest.API{WatchExpFunc: func(r *falconv1.WatchExpRequest, s grpc.ServerStreamingServer[falconv1.ExpEvent]) error {
		mu.Lock()
		a := attempts[min(i, len(attempts)-1)]
		i++
		mu.Unlock()
		for _, e := range a.send {
			if err := s.Send(e); err != nil {
				return err
			}
		}
		if a.err != codes.OK {
			return status.Errorf(a.err, "scripted %s", a.err)
		}
		return nil
	}}
}

func newWatch(t *testing.T, url string, clock *fakeClock) *Watch {
	c, err := client.New(url, client.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return &Watch{Client: c, ID: "exp-1", Sleep: clock.Sleep, Now: clock.Now}
}

// A stream cut by an error or closed without the terminal event is opened
// again after the last seq received; what the server sends twice is
// given once; the watch ends on the terminal event.
func TestWatchResumesAfterTheLastSeq(t *testing.T) {
	api := scripted(
		attempt{send: []*falconv1.ExpEvent{ev(1, "Created"), ev(2, "Running")}, err: codes.Unavailable},
		attempt{send: []*falconv1.ExpEvent{ev(2, "Running"), {Seq: 2, ExpId: "exp-1"}, ev(3, "Running")}}, // a heartbeat; then a clean close
		attempt{err: codes.Unavailable}, // down: no answer
		attempt{send: []*falconv1.ExpEvent{func() *falconv1.ExpEvent { e := ev(4, "Succeeded"); e.Terminal = true; return e }()}},
	)
	clock := &fakeClock{now: clitest.Now}
	w := newWatch(t, clitest.Start(t, api), clock)
	var breaks int
	w.OnBreak = func(error) { breaks++ }
	var got []int64
	if err := w.Run(context.Background(), func(e *falconv1.ExpEvent) error { got = append(got, e.GetSeq()); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	var afters []int64
	for _, r := range api.Requests("WatchExp") {
		afters = append(afters, r.(*falconv1.WatchExpRequest).GetAfterSeq())
	}
	if diff := cmp.Diff([]int64{0, 2, 3, 3}, afters); diff != "" {
		t.Errorf("after_seq of each attempt (-want +got):\n%s", diff)
	}
	if breaks != 3 || len(clock.sleeps) != 3 {
		t.Errorf("%d breaks and sleeps %v, want 3 of each", breaks, clock.sleeps)
	}
}

func TestWatchEnds(t *testing.T) {
	terminal := &falconv1.ExpEvent{Seq: 9, ExpId: "exp-1", Terminal: true}
	tests := []struct {
		name     string
		api      *clitest.API
		down     bool
		history  bool
		fnErr    error
		wantCode codes.Code
		wantSeqs []int64
	}{
		{name: "resumed after the end: the marker alone ends it", api: scripted(attempt{send: []*falconv1.ExpEvent{terminal}})},
		{name: "not found is not retried", api: scripted(attempt{err: codes.NotFound}), wantCode: codes.NotFound},
		{name: "never reached: unavailable after the grace", down: true, wantCode: codes.Unavailable},
		{name: "history only ends at the close", api: scripted(attempt{send: []*falconv1.ExpEvent{ev(1, "Created")}}), history: true, wantSeqs: []int64{1}},
		{name: "the caller's error ends it", api: scripted(attempt{send: []*falconv1.ExpEvent{ev(1, "Created")}}), fnErr: status.Error(codes.Unavailable, "mine"), wantCode: codes.Unavailable, wantSeqs: []int64{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := clitest.DownURL(t)
			if !tt.down {
				url = clitest.Start(t, tt.api)
			}
			clock := &fakeClock{now: clitest.Now}
			w := newWatch(t, url, clock)
			w.HistoryOnly = tt.history
			var seqs []int64
			err := w.Run(context.Background(), func(e *falconv1.ExpEvent) error {
				seqs = append(seqs, e.GetSeq())
				return tt.fnErr
			})
			if status.Code(err) != tt.wantCode {
				t.Errorf("Run = %v, want %s", err, tt.wantCode)
			}
			if tt.fnErr != nil && !errors.Is(err, tt.fnErr) {
				t.Errorf("Run = %v, want the caller's own error", err)
			}
			if diff := cmp.Diff(tt.wantSeqs, seqs); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if tt.down && clock.Now().Sub(clitest.Now) < FirstAnswerGrace {
				t.Errorf("gave up after %s, before the grace", clock.Now().Sub(clitest.Now))
			}
		})
	}
}
