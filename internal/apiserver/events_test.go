package apiserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// short is what a test compares of an event.
type short struct {
	Seq                      int64
	Kind, ID, Status, Reason string
	Message                  string
	Terminal                 bool
}

func shorten(e *falconv1.ExpEvent) short {
	return short{e.GetSeq(), e.GetKind(), e.GetId(), e.GetStatus(), e.GetReason(), e.GetMessage(), e.GetTerminal()}
}

// recvEvents reads n messages, each within a few seconds.
func recvEvents(t *testing.T, s falconv1.ExperimentService_WatchExpClient, n int) []short {
	t.Helper()
	var out []short
	for range n {
		ev, err := s.Recv()
		if err != nil {
			t.Fatalf("Recv after %v: %v", out, err)
		}
		out = append(out, shorten(ev))
	}
	return out
}

// An experiment's stream sends its history, then each change as it is
// written (woken by the change feed, not a poll: well within the poll
// interval), and ends after the experiment and every job ended, on an event
// that says so. A watcher resuming after a seq gets what follows it; one
// resuming after the end gets the end at once.
func TestWatchExpHistoryLiveAndEnd(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exp := env.Create(t, "watched", cpuRole)
	id, job := exp.GetId(), exp.GetJobs()[0].GetId()

	s, err := env.Exps.WatchExp(ctx, &falconv1.WatchExpRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	want := []short{
		{1, "experiment", id, "Created", "Waiting", "waiting for the resource manager", false},
		{2, "job", job, "Pending", "Waiting", "waiting for the resource manager", false},
	}
	got := recvEvents(t, s, 2)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("history (-want +got):\n%s", diff)
	}

	update := func(expected, st, reason, msg string) {
		t.Helper()
		if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: expected, Status: st, Reason: reason, Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	update("Pending", "Pending", "Waiting", "position 1 of 1")
	if got := recvEvents(t, s, 1); got[0] != (short{3, "job", job, "Pending", "Waiting", "position 1 of 1", false}) {
		t.Fatalf("live event %+v", got[0])
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the event took %s to reach the watcher: the change feed should wake it at once", d)
	}
	update("Pending", "Pending", "Waiting", "position 1 of 1") // nothing changes: no event
	update("Pending", "Running", "", "")
	update("Running", "Succeeded", "", "")
	// A job's move of status carries its experiment along in the same
	// write, its event after the job's.
	tail := []short{
		{4, "job", job, "Running", "", "", false},
		{5, "experiment", id, "Running", "", "main Running", false},
		{6, "job", job, "Succeeded", "", "", false},
		{7, "experiment", id, "Succeeded", "", "", true},
	}
	if diff := cmp.Diff(tail, recvEvents(t, s, 4)); diff != "" {
		t.Fatalf("live events (-want +got):\n%s", diff)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the terminal event: %v, want the end of the stream", err)
	}

	// Resuming after seq 4: the rest, ending as before.
	r, err := env.Exps.WatchExp(ctx, &falconv1.WatchExpRequest{Id: id, AfterSeq: 4})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tail[1:], recvEvents(t, r, 3)); diff != "" {
		t.Errorf("resumed after 4 (-want +got):\n%s", diff)
	}
	// After the end: a message without a change that says it is over.
	r, err = env.Exps.WatchExp(ctx, &falconv1.WatchExpRequest{Id: id, AfterSeq: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got := recvEvents(t, r, 1); got[0] != (short{Seq: 7, Terminal: true}) {
		t.Errorf("resumed after the end: %+v", got[0])
	}
	if _, err := r.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the end marker: %v", err)
	}
}

// history_only ends after what is kept, without waiting; bad requests are
// refused by name before any event.
func TestWatchExpHistoryOnlyAndRefusals(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exp := env.Create(t, "history", cpuRole)
	s, err := env.Exps.WatchExp(ctx, &falconv1.WatchExpRequest{Id: exp.GetId(), HistoryOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := recvEvents(t, s, 2); got[0].Seq != 1 || got[1].Seq != 2 || got[1].Terminal {
		t.Fatalf("history %+v", got)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("history_only after the history: %v, want the end", err)
	}
	for _, tt := range []struct {
		req  *falconv1.WatchExpRequest
		code codes.Code
	}{
		{&falconv1.WatchExpRequest{Id: "exp-0000000000"}, codes.NotFound},
		{&falconv1.WatchExpRequest{Id: "job-0000000000"}, codes.NotFound},
		{&falconv1.WatchExpRequest{Id: exp.GetId(), AfterSeq: -1}, codes.InvalidArgument},
	} {
		s, err := env.Exps.WatchExp(ctx, tt.req)
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != tt.code {
			t.Errorf("WatchExp(%v) = %v, want %s", tt.req, err, tt.code)
		}
	}
}

// Over HTTP the stream is newline-delimited JSON, one {"result": event}
// per line, each flushed as it is written; field names are the proto's.
func TestWatchExpNDJSON(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exp := env.Create(t, "ndjson", cpuRole)
	id, job := exp.GetId(), exp.GetJobs()[0].GetId()
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/v1/experiments/%s/events?after_seq=1", env.HTTPAddr, id), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET events: %s", resp.Status)
	}
	lines := bufio.NewScanner(resp.Body)
	next := func() map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("stream ended: %v", lines.Err())
		}
		var chunk struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(lines.Bytes(), &chunk); err != nil || chunk.Result == nil {
			t.Fatalf("line %q is not {\"result\": {...}}: %v", lines.Text(), err)
		}
		return chunk.Result
	}
	first := next()
	for _, k := range []string{"seq", "time", "exp_id", "kind", "id", "status", "reason", "message", "detail", "terminal"} {
		if _, ok := first[k]; !ok {
			t.Errorf("event %v lacks %q", first, k)
		}
	}
	if first["seq"] != "2" || first["kind"] != "job" || first["id"] != job || first["status"] != "Pending" {
		t.Errorf("first event after seq 1: %v", first)
	}
	// A live change arrives on the open response.
	if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Failed", Reason: "JobFailed", Message: "exit code 3"}); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev["status"] != "Failed" || ev["reason"] != "JobFailed" || ev["message"] != "exit code 3" {
		t.Errorf("live event over HTTP: %v", ev)
	}
}

// racingStore runs hook once, right after the second read of an
// experiment that finds it Running (the first is WatchExp's check that it
// exists; the second its read of the state): the experiment then ends
// between the watcher's read of its state and its next read of events.
type racingStore struct {
	store.Store
	mu    sync.Mutex
	reads int
	hook  func()
}

func (r *racingStore) GetExp(ctx context.Context, id string) (*store.Experiment, error) {
	e, err := r.Store.GetExp(ctx, id)
	if err == nil && e.Status == lifecycle.Running {
		r.mu.Lock()
		r.reads++
		fire := r.reads == 2
		r.mu.Unlock()
		if fire {
			r.hook()
		}
	}
	return e, err
}

// An end written after the watcher read the state, and read with the
// events that follow, is checked again: the stream still ends.
func TestWatchExpEndsWhenTheEndRacesTheCheck(t *testing.T) {
	st, err := sqlstore.Open(context.Background(), "sqlite", sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "falcon.db")))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exp := &store.Experiment{ID: ids.New(ids.Experiment), Name: "race", Status: lifecycle.Running}
	job := &store.Job{ID: ids.New(ids.Job), Role: "main", Status: lifecycle.Running}
	if err := st.CreateExp(ctx, exp, []*store.Job{job}, nil); err != nil {
		t.Fatal(err)
	}
	rs := &racingStore{Store: st}
	srv := apiserver.New(rs)
	rs.hook = func() {
		if _, err := st.UpdateExpStatus(ctx, store.StatusUpdate{ID: exp.ID, Expected: lifecycle.Running, Status: lifecycle.Succeeded}); err != nil {
			t.Error(err)
		}
	}
	sctx, stop := context.WithCancel(context.Background())
	running, err := srv.Serve(sctx, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); _ = running.Wait() }()
	conn, err := grpc.NewClient(running.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// The job ends first; reading the state for that end finds the
	// experiment Running, and then it ends.
	if _, err := st.UpdateJobStatus(ctx, store.StatusUpdate{ID: job.ID, Expected: lifecycle.Running, Status: lifecycle.Succeeded}); err != nil {
		t.Fatal(err)
	}
	s, err := falconv1.NewExperimentServiceClient(conn).WatchExp(ctx, &falconv1.WatchExpRequest{Id: exp.ID, AfterSeq: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := recvEvents(t, s, 2)
	if got[0].Status != "Succeeded" || got[1].Kind != "experiment" || got[1].Status != "Succeeded" || !got[1].Terminal {
		t.Fatalf("events %+v, want the job's end and then the experiment's, marked terminal", got)
	}
}
