package apiserver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// BenchmarkWatchExpLatency measures how long a job's status change takes to
// reach those who follow its experiment: from the start of the
// controller's UpdateJobStatus call to the moment each follower has read
// the change, over the HTTP gateway as the CLI reads it (NDJSON), on an
// in-process API server over SQLite (falcon dev's store). Cases, in one
// run:
//
//   - watchers=1: one `exp wait` (WatchExp).
//   - watchers=100/one-experiment: 100 followers of one experiment, so
//     each change wakes and is read by all of them.
//   - watchers=100/own-experiments: 100 experiments with one follower
//     each; a change of one wakes every stream, and one reads.
//   - poll=1s/clients=100, the baseline: 100 scripts polling GetExp every
//     second, as users' scripts do today, each starting at a random phase.
//
// It reports p50, p99 and max in ms. Run with -benchtime 1x: each case
// makes 50 changes per b.N (20 for the polling baseline, whose changes
// must be a poll period apart).
func BenchmarkWatchExpLatency(b *testing.B) {
	for _, bc := range []struct {
		name    string
		clients int
		spread  bool          // one experiment per client
		poll    time.Duration // 0: WatchExp
	}{
		{"watchers=1", 1, false, 0},
		{"watchers=100/one-experiment", 100, false, 0},
		{"watchers=100/own-experiments", 100, true, 0},
		{"poll=1s/clients=100", 100, false, time.Second},
	} {
		b.Run(bc.name, func(b *testing.B) {
			env := apitest.Start(b, map[string]string{"local": "local"})
			c, err := client.New("http://"+env.HTTPAddr, client.WithTimeout(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			exps := 1
			if bc.spread {
				exps = bc.clients
			}
			var jobs, ids []string
			for i := range exps {
				x := env.Create(b, fmt.Sprintf("bench-%d", i), cpuRole)
				ids, jobs = append(ids, x.GetId()), append(jobs, x.GetJobs()[0].GetId())
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			rec := newRecorder()
			var ready sync.WaitGroup
			for w := range bc.clients {
				id := ids[w%exps]
				ready.Add(1)
				if bc.poll > 0 {
					go pollExp(ctx, c, id, w, bc.poll, &ready, rec)
				} else {
					go watchExp(ctx, b, c, id, w, &ready, rec)
				}
			}
			ready.Wait()

			changes := 50 * b.N
			if bc.poll > 0 {
				changes = 20 * b.N
			}
			b.ResetTimer()
			for i := range changes {
				k := i % exps
				msg := fmt.Sprintf("change %d", i)
				want := bc.clients / exps
				rec.expect(msg, want)
				start := time.Now()
				rec.started(msg, start)
				if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{
					Id: jobs[k], ExpectedStatus: "Pending", Status: "Pending", Reason: "Waiting", Message: msg,
				}); err != nil {
					b.Fatal(err)
				}
				if !rec.wait(msg, 10*time.Second) {
					b.Fatalf("%s reached %d of %d followers within 10s", msg, rec.count(msg), want)
				}
			}
			b.StopTimer()
			lat := rec.latencies()
			slices.Sort(lat)
			p := func(q float64) float64 {
				return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(p(0.50), "p50-ms")
			b.ReportMetric(p(0.99), "p99-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
			b.ReportMetric(float64(len(lat)), "deliveries")
		})
	}
}

// watchExp follows one experiment's events over HTTP and records when each
// change's message arrives.
func watchExp(ctx context.Context, b *testing.B, c *client.Client, id string, who int, ready *sync.WaitGroup, rec *recorder) {
	s, err := c.WatchExp(ctx, &falconv1.WatchExpRequest{Id: id})
	if err != nil {
		b.Error(err)
		ready.Done()
		return
	}
	defer s.Close()
	once := false
	for {
		ev, err := s.Recv()
		if err != nil {
			if !once {
				ready.Done()
			}
			return
		}
		if !once && ev.GetSeq() >= 2 { // the history: the experiment and its job
			once = true
			ready.Done()
		}
		rec.got(ev.GetMessage(), who, time.Now())
	}
}

// pollExp reads the experiment every period, from a random phase, and
// records when it first shows each change.
func pollExp(ctx context.Context, c *client.Client, id string, who int, period time.Duration, ready *sync.WaitGroup, rec *recorder) {
	ready.Done()
	t := time.NewTimer(time.Duration(rand.Int64N(int64(period))))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(period)
		x, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: id})
		if err != nil {
			continue
		}
		rec.got(x.GetJobs()[0].GetMessage(), who, time.Now())
	}
}

// recorder collects, per change, when it was made and when each follower
// first saw it (a poller sees a change on every poll until the next).
type recorder struct {
	mu    sync.Mutex
	start map[string]time.Time
	want  map[string]int
	seen  map[string]map[int]time.Duration
	done  map[string]chan struct{}
}

func newRecorder() *recorder {
	return &recorder{start: map[string]time.Time{}, want: map[string]int{}, seen: map[string]map[int]time.Duration{}, done: map[string]chan struct{}{}}
}

func (r *recorder) expect(msg string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want[msg] = n
	r.seen[msg] = map[int]time.Duration{}
	r.done[msg] = make(chan struct{})
}

func (r *recorder) started(msg string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.start[msg] = at
}

// got notes follower who's sighting of msg; only the first counts.
func (r *recorder) got(msg string, who int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start, ok := r.start[msg]
	if _, dup := r.seen[msg][who]; !ok || dup {
		return
	}
	r.seen[msg][who] = at.Sub(start)
	if len(r.seen[msg]) == r.want[msg] {
		close(r.done[msg])
	}
}

func (r *recorder) count(msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen[msg])
}

func (r *recorder) wait(msg string, limit time.Duration) bool {
	r.mu.Lock()
	ch := r.done[msg]
	r.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-time.After(limit):
		return false
	}
}

func (r *recorder) latencies() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for _, m := range r.seen {
		for _, l := range m {
			out = append(out, l)
		}
	}
	return out
}
