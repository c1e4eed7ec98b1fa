package events

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

var ctx = context.Background()

type server struct {
	t    *testing.T
	env  *apitest.Env
	ctl  falconv1.ExperimentServiceClient
	id   string
	job  string
	from string
}

// newServer serves a real API server with one experiment of one job.
func newServer(t *testing.T) *server {
	env := apitest.Start(t, map[string]string{"local": "local"})
	exp := env.Create(t, "events", map[string]*falconv1.TaskSpec{"worker": {Command: "true", Replica: 1}})
	return &server{t: t, env: env, ctl: falconv1.NewExperimentServiceClient(env.Conn), id: exp.GetId(), job: exp.GetJobs()[0].GetId(), from: "Pending"}
}

func (s *server) url() string { return "http://" + s.env.HTTPAddr }

func (s *server) job1(st, reason, msg, pool string) {
	s.t.Helper()
	if _, err := s.env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: s.job, ExpectedStatus: s.from, Status: st, Reason: reason, Message: msg, NodePool: pool}); err != nil {
		s.t.Fatal(err)
	}
	s.from = st
}

func execute(t *testing.T, url string, format output.Format, args ...string) (*clitest.Streams, error) {
	f, s := clitest.NewFactory(t, url, format)
	err := clitest.Execute(NewCmdEvents(f, nil), args...)
	return s, err
}

// Without -f: the history, then exit, as JSON lines with the details as
// keys of their own.
func TestEventsHistoryJSON(t *testing.T) {
	s := newServer(t)
	s.job1("Pending", "Provisioning", "creating node pool", "falcon-pool")
	out, err := execute(t, s.url(), output.JSON, s.id)
	if err != nil {
		t.Fatal(err)
	}
	text := out.Out.String()
	var got []map[string]any
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		delete(m, "time")
		got = append(got, m)
	}
	want := []map[string]any{
		{"seq": 1.0, "exp_id": s.id, "kind": "experiment", "id": s.id, "status": "Created", "reason": "Waiting", "message": "waiting for the resource manager"},
		{"seq": 2.0, "exp_id": s.id, "kind": "job", "id": s.job, "status": "Pending", "reason": "Waiting", "message": "waiting for the resource manager", "role": "worker"},
		{"seq": 3.0, "exp_id": s.id, "kind": "job", "id": s.job, "status": "Pending", "reason": "Provisioning", "message": "creating node pool", "role": "worker", "node_pool": "falcon-pool"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(text, `{"seq":1,"time":"`) {
		t.Errorf("keys out of order: %s", text)
	}

	// --after-seq continues after an event.
	out, err = execute(t, s.url(), output.JSON, s.id, "--after-seq", "2")
	if err != nil || strings.Count(out.Out.String(), "\n") != 1 || !strings.Contains(out.Out.String(), `"seq":3`) {
		t.Errorf("--after-seq 2: %v\n%s", err, out.Out)
	}
}

// -f prints changes as they come and exits after the terminal event.
func TestEventsFollow(t *testing.T) {
	s := newServer(t)
	f, out := clitest.NewFactory(t, s.url(), output.Table)
	done := make(chan error, 1)
	go func() { done <- clitest.Execute(NewCmdEvents(f, nil), s.id, "-f") }()
	s.job1("Running", "", "", "") // the experiment follows in the same write
	select {
	case err := <-done:
		t.Fatalf("-f returned before the experiment ended: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	s.job1("Succeeded", "", "", "")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("-f did not exit after the terminal event:\n%s\n%s", out.Out, out.ErrOut)
	}
	lines := strings.Split(strings.TrimSpace(out.Out.String()), "\n")
	wantEnds := []string{
		"#1  experiment " + s.id + "  Created (Waiting): waiting for the resource manager",
		"#2  job worker " + s.job + "  Pending (Waiting): waiting for the resource manager",
		"#3  job worker " + s.job + "  Running",
		"#4  experiment " + s.id + "  Running: worker Running",
		"#5  job worker " + s.job + "  Succeeded",
		"#6  experiment " + s.id + "  Succeeded",
	}
	if len(lines) != len(wantEnds) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(wantEnds), out.Out)
	}
	for i, w := range wantEnds {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d = %q, want it to end with %q", i+1, lines[i], w)
		}
	}
}

func TestEventsNotFound(t *testing.T) {
	s := newServer(t)
	_, err := execute(t, s.url(), output.Table, "exp-0000000000")
	if errdefs.ExitCode(errdefs.Code(err)) != errdefs.ExitNotFound {
		t.Errorf("unknown experiment: %v, want exit %d", err, errdefs.ExitNotFound)
	}
}

func TestLineAndJSON(t *testing.T) {
	ev := &falconv1.ExpEvent{
		Seq: 4, Time: timestamppb.New(time.Date(2026, 12, 1, 10, 0, 3, 500, time.UTC)), ExpId: "exp-1", Kind: "job", Id: "job-2",
		Status: "Pending", Reason: "Provisioning", Message: "creating\nnode pool",
		Detail: map[string]string{"role": "worker", "node_pool": "falcon-job-2", "cluster": "edge-a", "status": "shadow"},
	}
	if got, want := Line(ev), "2026-12-01T10:00:03Z  #4  job worker job-2  Pending (Provisioning): creating node pool  cluster=edge-a node_pool=falcon-job-2 status=shadow"; got != want {
		t.Errorf("Line:\n got %s\nwant %s", got, want)
	}
	b, err := JSON(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"seq":4,"time":"2026-12-01T10:00:03.0000005Z","exp_id":"exp-1","kind":"job","id":"job-2","status":"Pending","reason":"Provisioning","message":"creating\nnode pool","cluster":"edge-a","node_pool":"falcon-job-2","role":"worker"}`
	if string(b) != want {
		t.Errorf("JSON:\n got %s\nwant %s", b, want)
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := Write(w, output.YAML, ev); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if !strings.HasPrefix(buf.String(), "---\n") || !strings.Contains(buf.String(), "node_pool: falcon-job-2") {
		t.Errorf("YAML:\n%s", buf.String())
	}
}
