package wait

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// fakeClock advances only when the command sleeps.
type fakeClock struct {
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

// step is one answer of the scripted GetExp: a status, or an error.
type step struct {
	status string
	err    codes.Code
}

// scriptedAPI answers GetExp with steps in order, repeating the last one.
func scriptedAPI(steps ...step) *clitest.API {
	var mu sync.Mutex
	i := 0
	return &clitest.API{
		GetExpFunc: func(_ context.Context, r *falconv1.GetExpRequest) (*falconv1.Experiment, error) {
			mu.Lock()
			s := steps[min(i, len(steps)-1)]
			i++
			mu.Unlock()
			if s.err != codes.OK {
				return nil, status.Errorf(s.err, "scripted %s", s.err)
			}
			exp := &falconv1.Experiment{Id: r.GetId(), Name: "bench", Status: s.status}
			if s.status == "Failed" {
				exp.Reason, exp.Message = "RoleFailed", "role worker failed: exit code 3"
			}
			return exp, nil
		},
	}
}

func TestWait(t *testing.T) {
	tests := []struct {
		name       string
		steps      []step
		serverDown bool
		args       []string
		wantCode   int // exit code; 0 for success
		wantKind   string
		wantErr    string
		wantSleeps []time.Duration
		wantOut    string // substring of stdout
		wantStderr string // substring of stderr
	}{
		{
			name:       "succeeded",
			steps:      []step{{status: "Created"}, {status: "Running"}, {status: "Succeeded"}},
			wantSleeps: []time.Duration{time.Second, time.Second},
			wantOut:    "Succeeded",
		},
		{
			name:       "already finished: no sleep at all",
			steps:      []step{{status: "Succeeded"}},
			wantSleeps: nil,
			wantOut:    "Succeeded",
		},
		{
			name:       "failed",
			steps:      []step{{status: "Running"}, {status: "Failed"}},
			wantCode:   errdefs.ExitNotSucceeded,
			wantKind:   "NotSucceeded",
			wantErr:    "experiment exp-1 ended Failed (RoleFailed): role worker failed: exit code 3",
			wantSleeps: []time.Duration{time.Second},
			wantOut:    "RoleFailed",
		},
		{
			name:       "aborted",
			steps:      []step{{status: "Aborting"}, {status: "Aborted"}},
			wantCode:   errdefs.ExitNotSucceeded,
			wantErr:    "ended Aborted",
			wantSleeps: []time.Duration{time.Second},
		},
		{
			name:       "timeout names the last status and prints the last experiment",
			steps:      []step{{status: "Running"}},
			args:       []string{"--timeout", "5s", "--interval", "2s"},
			wantCode:   errdefs.ExitTimeout,
			wantKind:   "Timeout",
			wantErr:    "timed out after 5s waiting for exp-1 to end; last seen status Running",
			wantSleeps: []time.Duration{2 * time.Second, 2 * time.Second, time.Second},
			wantOut:    "Running",
		},
		{
			name:       "transient errors are retried",
			steps:      []step{{status: "Running"}, {err: codes.Unavailable}, {err: codes.Unavailable}, {err: codes.DeadlineExceeded}, {status: "Succeeded"}},
			wantSleeps: []time.Duration{time.Second, time.Second, time.Second, time.Second},
			wantOut:    "Succeeded",
			wantStderr: "Warning: scripted Unavailable; retrying until the timeout",
		},
		{
			name:       "transient errors until the timeout",
			steps:      []step{{status: "Running"}, {err: codes.Unavailable}},
			args:       []string{"--timeout", "3s"},
			wantCode:   errdefs.ExitTimeout,
			wantErr:    "last seen status Running; last error: scripted Unavailable",
			wantSleeps: []time.Duration{time.Second, time.Second, time.Second},
		},
		{
			name:       "server never reached: unavailable after a short grace",
			serverDown: true,
			args:       []string{"--timeout", "1h", "--interval", "4s"},
			wantCode:   errdefs.ExitUnavailable,
			wantErr:    "cannot reach Falcon server",
			wantSleeps: []time.Duration{4 * time.Second, 4 * time.Second, 4 * time.Second},
		},
		{
			name:       "a server restarting at the start is waited for",
			steps:      []step{{err: codes.Unavailable}, {err: codes.Unavailable}, {status: "Succeeded"}},
			wantSleeps: []time.Duration{time.Second, time.Second},
			wantOut:    "Succeeded",
			wantStderr: "Warning: scripted Unavailable; retrying until the timeout",
		},
		{
			name:     "not found is not transient",
			steps:    []step{{err: codes.NotFound}},
			wantCode: errdefs.ExitNotFound,
			wantErr:  "scripted NotFound",
		},
		{
			name:       "--timeout 0 waits as long as it takes",
			steps:      []step{{status: "Running"}, {status: "Running"}, {status: "Running"}, {status: "Succeeded"}},
			args:       []string{"--timeout", "0", "--interval", "1h"},
			wantSleeps: []time.Duration{time.Hour, time.Hour, time.Hour},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := clitest.DownURL(t)
			if !tt.serverDown {
				url = clitest.Start(t, scriptedAPI(tt.steps...))
			}
			f, s := clitest.NewFactory(t, url, output.Table)
			clock := &fakeClock{now: clitest.Now}
			cmd := NewCmdWait(f, func(ctx context.Context, o *Options) error {
				o.Now, o.Sleep = clock.Now, clock.Sleep
				return waitRun(ctx, o)
			})
			err := clitest.Execute(cmd, append([]string{"exp-1"}, tt.args...)...)

			code, kind := 0, ""
			var ee *factory.ExitError
			switch {
			case errors.As(err, &ee):
				code, kind = ee.Code, ee.Kind
			case err != nil:
				code = errdefs.ExitCode(errdefs.Code(err))
			}
			if code != tt.wantCode {
				t.Errorf("exit code %d (%v), want %d", code, err, tt.wantCode)
			}
			if tt.wantKind != "" && kind != tt.wantKind {
				t.Errorf("kind %q, want %q", kind, tt.wantKind)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want it to contain %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantSleeps, clock.sleeps); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			if !strings.Contains(s.Out.String(), tt.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantOut, s.Out)
			}
			if !strings.Contains(s.ErrOut.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, s.ErrOut)
			}
			if n := strings.Count(s.ErrOut.String(), "Warning:"); n > 1 {
				t.Errorf("%d warnings for one streak of errors:\n%s", n, s.ErrOut)
			}
		})
	}
}

func TestWaitJSONAndProgress(t *testing.T) {
	url := clitest.Start(t, scriptedAPI(step{status: "Created"}, step{status: "Running"}, step{status: "Succeeded"}))
	f, s := clitest.NewFactory(t, url, output.JSON)
	s.IO.SetStderrTTY(true)
	clock := &fakeClock{now: clitest.Now}
	cmd := NewCmdWait(f, func(ctx context.Context, o *Options) error {
		o.Now, o.Sleep = clock.Now, clock.Sleep
		return waitRun(ctx, o)
	})
	if err := clitest.Execute(cmd, "exp-1"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Out.String(), "{\n") || !strings.Contains(s.Out.String(), `"status": "Succeeded"`) {
		t.Errorf("stdout = %s, want the final experiment as JSON", s.Out)
	}
	if want := "exp-1: Created\nexp-1: Running\nexp-1: Succeeded\n"; s.ErrOut.String() != want {
		t.Errorf("progress on a terminal = %q, want %q", s.ErrOut, want)
	}
}

func TestWaitFlags(t *testing.T) {
	f, _ := clitest.NewFactory(t, clitest.DownURL(t), output.JSON)
	var got *Options
	if err := clitest.Execute(NewCmdWait(f, func(_ context.Context, o *Options) error { got = o; return nil }), "exp-1"); err != nil {
		t.Fatal(err)
	}
	if got.Timeout != 30*time.Minute || got.Interval != time.Second || got.ID != "exp-1" {
		t.Errorf("defaults: timeout %s interval %s id %q", got.Timeout, got.Interval, got.ID)
	}
	if err := clitest.Execute(NewCmdWait(f, nil), "exp-1", "--timeout", "8h", "--interval", "0s"); errdefs.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "--interval") {
		t.Errorf("--interval 0: %v", err)
	}
	if err := clitest.Execute(NewCmdWait(f, nil), "exp-1", "--timeout", "-1s"); errdefs.Code(err) != codes.InvalidArgument {
		t.Errorf("--timeout -1s: %v", err)
	}
	if err := clitest.Execute(NewCmdWait(f, nil), "exp-1", "--timeout", "soon"); err == nil {
		t.Error("--timeout soon: want a flag error")
	}
}
