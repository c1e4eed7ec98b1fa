package wait

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// server is a real API server whose experiments the test moves as the
// expController would.
type server struct {
	t   *testing.T
	env *apitest.Env
	ctl falconv1.ExperimentServiceClient
}

func newServer(t *testing.T) *server {
	env := apitest.Start(t, map[string]string{"local": "local"})
	return &server{t: t, env: env, ctl: falconv1.NewExperimentServiceClient(env.Conn)}
}

func (s *server) url() string { return "http://" + s.env.HTTPAddr }

func (s *server) create(name string) string {
	return s.env.Create(s.t, name, map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}}).GetId()
}

// move takes the experiment through statuses, each from the one before,
// starting at Created.
func (s *server) move(id string, statuses ...string) {
	s.t.Helper()
	from := "Created"
	for _, st := range statuses {
		req := &falconv1.UpdateExpStatusRequest{Id: id, ExpectedStatus: from, Status: st}
		if st == "Failed" {
			req.Reason, req.Message = "RoleFailed", "role main failed: exit code 3"
		}
		if _, err := s.ctl.UpdateExpStatus(context.Background(), req); err != nil {
			s.t.Fatal(err)
		}
		from = st
	}
}

// run runs `exp wait args` in the background; its result comes on the
// channel.
type run struct {
	s    *clitest.Streams
	done chan error
}

func start(t *testing.T, url string, format output.Format, args ...string) *run {
	f, s := clitest.NewFactory(t, url, format)
	r := &run{s: s, done: make(chan error, 1)}
	cmd := NewCmdWait(f, func(ctx context.Context, o *Options) error {
		o.Grace = 200 * time.Millisecond
		o.Sleep = func(ctx context.Context, d time.Duration) error { time.Sleep(time.Millisecond); return ctx.Err() }
		return waitRun(ctx, o)
	})
	go func() { r.done <- clitest.Execute(cmd, args...) }()
	return r
}

// result waits for the command and returns its exit code and error.
func (r *run) result(t *testing.T) (int, error) {
	t.Helper()
	select {
	case err := <-r.done:
		return exitCode(err), err
	case <-time.After(20 * time.Second):
		t.Fatalf("exp wait still running; stderr:\n%s", r.s.ErrOut)
		return 0, nil
	}
}

// still checks that the command has not returned.
func (r *run) still(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		t.Fatalf("exp wait returned early: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
}

func exitCode(err error) int {
	var ee *factory.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.Code
	case err != nil:
		return errdefs.ExitCode(errdefs.Code(err))
	}
	return 0
}

func TestWaitOne(t *testing.T) {
	for _, tt := range []struct {
		end      []string
		wantCode int
		wantErr  string
	}{
		{end: []string{"Running", "Succeeded"}},
		{end: []string{"Running", "Failed"}, wantCode: errdefs.ExitNotSucceeded, wantErr: "ended Failed (RoleFailed): role main failed: exit code 3"},
		{end: []string{"Aborting", "Aborted"}, wantCode: errdefs.ExitNotSucceeded, wantErr: "ended Aborted"},
	} {
		t.Run(tt.end[len(tt.end)-1], func(t *testing.T) {
			s := newServer(t)
			id := s.create("one")
			r := start(t, s.url(), output.JSON, id)
			r.still(t)
			s.move(id, tt.end...)
			code, err := r.result(t)
			if code != tt.wantCode || (tt.wantErr != "" && !strings.Contains(fmt.Sprint(err), tt.wantErr)) {
				t.Errorf("exit %d (%v), want %d %q", code, err, tt.wantCode, tt.wantErr)
			}
			if want := fmt.Sprintf(`"status": %q`, tt.end[len(tt.end)-1]); !strings.Contains(r.s.Out.String(), want) || !strings.HasPrefix(r.s.Out.String(), "{\n") {
				t.Errorf("stdout = %s, want the experiment as it ended, as JSON", r.s.Out)
			}
			if r.s.ErrOut.Len() != 0 {
				t.Errorf("stderr without --progress or a terminal: %s", r.s.ErrOut)
			}
		})
	}
}

// Already over: the history says so, and wait returns at once.
func TestWaitAlreadyEnded(t *testing.T) {
	s := newServer(t)
	id := s.create("over")
	s.move(id, "Running", "Succeeded")
	if code, err := start(t, s.url(), output.Table, id).result(t); code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
}

// --all fails fast: one failure ends the wait with 7 while others run;
// every experiment printed as it ended.
func TestWaitAllFailsFast(t *testing.T) {
	s := newServer(t)
	a, b, c := s.create("a"), s.create("b"), s.create("c")
	r := start(t, s.url(), output.JSON, a, b, c, "--all")
	s.move(a, "Running", "Succeeded")
	r.still(t)
	s.move(b, "Running", "Failed")
	code, err := r.result(t)
	if code != errdefs.ExitNotSucceeded || !strings.Contains(fmt.Sprint(err), b) {
		t.Fatalf("exit %d (%v), want %d naming %s", code, err, errdefs.ExitNotSucceeded, b)
	}
	out := r.s.Out.String()
	if !strings.Contains(out, a) || !strings.Contains(out, b) || strings.Contains(out, c) {
		t.Errorf("stdout should hold a and b (ended), not c (running):\n%s", out)
	}
}

func TestWaitAllSucceed(t *testing.T) {
	s := newServer(t)
	a, b := s.create("a"), s.create("b")
	r := start(t, s.url(), output.Table, a, b)
	s.move(b, "Running", "Succeeded")
	r.still(t)
	s.move(a, "Running", "Succeeded")
	if code, err := r.result(t); code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if strings.Count(r.s.Out.String(), "Succeeded") < 2 {
		t.Errorf("stdout should show both:\n%s", r.s.Out)
	}
}

// --any returns with the first that ends, its outcome deciding the code.
func TestWaitAny(t *testing.T) {
	for _, tt := range []struct {
		end      string
		wantCode int
	}{{"Succeeded", 0}, {"Failed", errdefs.ExitNotSucceeded}} {
		t.Run(tt.end, func(t *testing.T) {
			s := newServer(t)
			a, b := s.create("a"), s.create("b")
			r := start(t, s.url(), output.JSON, a, b, "--any")
			r.still(t)
			s.move(b, "Running", tt.end)
			if code, err := r.result(t); code != tt.wantCode {
				t.Fatalf("exit %d (%v), want %d", code, err, tt.wantCode)
			}
			if !strings.Contains(r.s.Out.String(), b) || strings.Contains(r.s.Out.String(), a) {
				t.Errorf("stdout should hold only the one that ended:\n%s", r.s.Out)
			}
		})
	}
}

// --progress prints every change to stderr without a terminal; the
// timeout prints the experiment as it is and names its last status.
func TestWaitProgressAndTimeout(t *testing.T) {
	s := newServer(t)
	id := s.create("slow")
	r := start(t, s.url(), output.Table, id, "--progress", "--timeout", "1500ms")
	time.Sleep(300 * time.Millisecond)
	s.move(id, "Running")
	code, err := r.result(t)
	if code != errdefs.ExitTimeout || !strings.Contains(fmt.Sprint(err), "timed out after 1.5s waiting for "+id+" to end; last seen status Running") {
		t.Fatalf("exit %d (%v), want %d naming the last status", code, err, errdefs.ExitTimeout)
	}
	if !strings.Contains(r.s.Out.String(), "Running") {
		t.Errorf("stdout should show the experiment as it is:\n%s", r.s.Out)
	}
	for _, want := range []string{id + ": Created (Waiting)", id + ": Running", " main job-"} {
		if !strings.Contains(r.s.ErrOut.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, r.s.ErrOut)
		}
	}
}

func TestWaitRefusals(t *testing.T) {
	s := newServer(t)
	if code, err := start(t, s.url(), output.Table, "exp-0000000000").result(t); code != errdefs.ExitNotFound {
		t.Errorf("unknown experiment: exit %d (%v), want %d", code, err, errdefs.ExitNotFound)
	}
	if code, err := start(t, clitest.DownURL(t), output.Table, "exp-0000000000").result(t); code != errdefs.ExitUnavailable || !strings.Contains(fmt.Sprint(err), "cannot reach Falcon server") {
		t.Errorf("server never reached: exit %d (%v), want %d", code, err, errdefs.ExitUnavailable)
	}
}

// A stream that breaks is resumed after its last event, with one warning.
func TestWaitResumesABrokenStream(t *testing.T) {
	calls := 0
	api := &clitest.API{
		WatchExpFunc: func(r *falconv1.WatchExpRequest, s grpc.ServerStreamingServer[falconv1.ExpEvent]) error {
			calls++
			if calls == 1 {
				_ = s.Send(&falconv1.ExpEvent{Seq: 1, ExpId: r.GetId(), Kind: "experiment", Id: r.GetId(), Status: "Running"})
				return status.Error(codes.Unavailable, "server restarting")
			}
			if r.GetAfterSeq() != 1 {
				return status.Errorf(codes.InvalidArgument, "resumed after %d, want 1", r.GetAfterSeq())
			}
			return s.Send(&falconv1.ExpEvent{Seq: 2, ExpId: r.GetId(), Kind: "experiment", Id: r.GetId(), Status: "Succeeded", Terminal: true})
		},
		GetExpFunc: func(_ context.Context, r *falconv1.GetExpRequest) (*falconv1.Experiment, error) {
			return &falconv1.Experiment{Id: r.GetId(), Status: "Succeeded"}, nil
		},
	}
	r := start(t, clitest.Start(t, api), output.Table, "exp-1")
	if code, err := r.result(t); code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if got := r.s.ErrOut.String(); strings.Count(got, "Warning:") != 1 || !strings.Contains(got, "server restarting") {
		t.Errorf("stderr = %q, want one warning about the break", got)
	}
}

func TestWaitFlags(t *testing.T) {
	f, _ := clitest.NewFactory(t, clitest.DownURL(t), output.JSON)
	var got *Options
	if err := clitest.Execute(NewCmdWait(f, func(_ context.Context, o *Options) error { got = o; return nil }), "exp-1", "exp-2", "--interval", "5s"); err != nil {
		t.Fatal(err)
	}
	if got.Timeout != 30*time.Minute || got.Any || len(got.IDs) != 2 {
		t.Errorf("defaults: timeout %s any %v ids %v", got.Timeout, got.Any, got.IDs)
	}
	for _, args := range [][]string{
		{"exp-1", "--all", "--any"},
		{"exp-1", "--timeout", "-1s"},
		{"exp-1", "--interval", "0s"},
	} {
		if err := clitest.Execute(NewCmdWait(f, nil), args...); errdefs.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want InvalidArgument", args, err)
		}
	}
	if err := clitest.Execute(NewCmdWait(f, nil), "exp-1", "--timeout", "soon"); err == nil {
		t.Error("--timeout soon: want a flag error")
	}
	if err := clitest.Execute(NewCmdWait(f, nil)); err == nil {
		t.Error("no ID: want an error")
	}
}
