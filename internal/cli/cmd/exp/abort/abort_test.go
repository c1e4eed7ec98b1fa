package abort

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"sigs.k8s.io/yaml"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// newAPI knows exp-running (aborted now), exp-done (already Succeeded) and
// exp-stuck (Aborting; only a forced abort ends it) and exp-locked (the
// server refuses); anything else is not found.
func newAPI() *clitest.API {
	return &clitest.API{
		AbortExpFunc: func(_ context.Context, r *falconv1.AbortExpRequest) (*falconv1.AbortExpResponse, error) {
			switch r.GetId() {
			case "exp-running":
				return &falconv1.AbortExpResponse{Changed: true, Experiment: &falconv1.Experiment{Id: r.GetId(), Status: "Aborting", Message: r.GetReason()}}, nil
			case "exp-done":
				return &falconv1.AbortExpResponse{Changed: false, Message: "experiment is already Succeeded", Experiment: &falconv1.Experiment{Id: r.GetId(), Status: "Succeeded"}}, nil
			case "exp-stuck": // Aborting, and its cluster never answers
				if !r.GetForce() {
					return &falconv1.AbortExpResponse{Changed: false, Message: "experiment exp-stuck is already Aborting; nothing to abort", Experiment: &falconv1.Experiment{Id: r.GetId(), Status: "Aborting"}}, nil
				}
				return &falconv1.AbortExpResponse{Changed: true, Message: "experiment exp-stuck is aborted without waiting for its clusters; what they started may run until they confirm the stop, which the controller keeps asking for",
					Experiment: &falconv1.Experiment{Id: r.GetId(), Status: "Aborted", Message: "force-aborted by alice: " + r.GetReason()}}, nil
			case "exp-locked":
				return nil, status.Error(codes.PermissionDenied, "exp-locked belongs to bob")
			}
			return nil, status.Errorf(codes.NotFound, "experiment %q not found", r.GetId())
		},
	}
}

func TestConfirmation(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		stdinTTY  bool
		answer    string
		wantCalls int
		wantErr   string
		wantCode  int
	}{
		{name: "--yes without a terminal", args: []string{"exp-running", "--yes"}, wantCalls: 1},
		{name: "-y", args: []string{"exp-running", "-y"}, wantCalls: 1},
		{name: "no terminal, no --yes: refused", args: []string{"exp-running"}, wantErr: "--yes: required when stdin is not a terminal", wantCode: errdefs.ExitInvalid},
		{name: "terminal, answered yes", args: []string{"exp-running"}, stdinTTY: true, answer: "y\n", wantCalls: 1},
		{name: "terminal, answered no", args: []string{"exp-running"}, stdinTTY: true, answer: "n\n", wantErr: "cancelled: nothing was aborted", wantCode: errdefs.ExitError},
		{name: "terminal, --yes skips the prompt", args: []string{"exp-running", "--yes"}, stdinTTY: true, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newAPI()
			url := clitest.Start(t, api)
			f, s := clitest.NewFactory(t, url, output.Table)
			s.IO.SetStdinTTY(tt.stdinTTY)
			s.In.WriteString(tt.answer)
			err := clitest.Execute(NewCmdAbort(f, nil), tt.args...)
			if got := len(api.Requests("AbortExp")); got != tt.wantCalls {
				t.Errorf("AbortExp called %d times, want %d", got, tt.wantCalls)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
			if code := exitCode(err); code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
		})
	}
}

// exitCode mirrors package cli's mapping for the errors a command returns.
func exitCode(err error) int {
	var ee *factory.ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return errdefs.ExitCode(errdefs.Code(err))
}

func TestAbort(t *testing.T) {
	api := newAPI()
	url := clitest.Start(t, api)

	f, s := clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdAbort(f, nil), "exp-running", "--reason", "wrong image", "--yes"); err != nil {
		t.Fatal(err)
	}
	if got := api.Requests("AbortExp")[0].(*falconv1.AbortExpRequest); got.GetReason() != "wrong image" {
		t.Errorf("reason sent = %q", got.GetReason())
	}
	if s.Out.String() != "exp-running: aborting (Aborting)\n" {
		t.Errorf("output = %q", s.Out)
	}

	// Already terminal: nothing changes, and that is not an error.
	f, s = clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdAbort(f, nil), "exp-done", "--yes"); err != nil {
		t.Fatalf("aborting a finished experiment: %v, want success", err)
	}
	if s.Out.String() != "exp-done: nothing changed: experiment is already Succeeded\n" {
		t.Errorf("output = %q", s.Out)
	}

	// JSON: the AbortExpResponse, changed=false visible to scripts.
	f, s = clitest.NewFactory(t, url, output.JSON)
	if err := clitest.Execute(NewCmdAbort(f, nil), "exp-done", "--yes"); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil || got["changed"] != false || got["message"] != "experiment is already Succeeded" {
		t.Errorf("json = %s (%v)", s.Out, err)
	}

	// One ID that fails returns the error itself.
	f, _ = clitest.NewFactory(t, url, output.Table)
	err := clitest.Execute(NewCmdAbort(f, nil), "exp-missing", "--yes")
	if status.Code(err) != codes.NotFound {
		t.Errorf("single unknown ID: %v, want NotFound", err)
	}
}

func TestAbortManyReportsEachAndExitsWithTheWorst(t *testing.T) {
	api := newAPI()
	url := clitest.Start(t, api)
	f, s := clitest.NewFactory(t, url, output.Table)
	err := clitest.Execute(NewCmdAbort(f, nil), "exp-running", "exp-missing", "exp-done", "exp-locked", "--yes")
	if n := len(api.Requests("AbortExp")); n != 4 {
		t.Errorf("AbortExp called %d times, want every ID tried", n)
	}
	for _, want := range []string{"exp-running: aborting", "exp-done: nothing changed"} {
		if !strings.Contains(s.Out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, s.Out)
		}
	}
	for _, want := range []string{`Error: exp-missing: experiment "exp-missing" not found`, "Error: exp-locked: exp-locked belongs to bob"} {
		if !strings.Contains(s.ErrOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, s.ErrOut)
		}
	}
	var ee *factory.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("error = %v, want an ExitError", err)
	}
	// NotFound exits 3, PermissionDenied 5: the worst is 5.
	if ee.Code != errdefs.ExitAuth || ee.Kind != "PermissionDenied" {
		t.Errorf("exit %d (%s), want %d (PermissionDenied)", ee.Code, ee.Kind, errdefs.ExitAuth)
	}
	if !strings.Contains(err.Error(), "could not abort 2 of 4 experiments: exp-missing, exp-locked") {
		t.Errorf("error = %q", err)
	}
}

// Several answers each parse on their own: a JSON object per line, a YAML
// document each.
func TestAbortManyPrintsOneDocumentEach(t *testing.T) {
	for _, format := range []output.Format{output.JSON, output.YAML} {
		t.Run(string(format), func(t *testing.T) {
			url := clitest.Start(t, newAPI())
			f, s := clitest.NewFactory(t, url, format)
			if err := clitest.Execute(NewCmdAbort(f, nil), "exp-running", "exp-done", "--yes"); err != nil {
				t.Fatal(err)
			}
			var docs []string
			if format == output.JSON {
				docs = strings.Split(strings.TrimSpace(s.Out.String()), "\n")
			} else {
				docs = strings.Split(strings.TrimPrefix(s.Out.String(), "---\n"), "---\n")
			}
			if len(docs) != 2 {
				t.Fatalf("%d documents, want 2:\n%s", len(docs), s.Out)
			}
			for i, doc := range docs {
				var v struct {
					Experiment struct{ ID string } `json:"experiment"`
				}
				if err := yaml.Unmarshal([]byte(doc), &v); err != nil || v.Experiment.ID == "" {
					t.Errorf("document %d does not parse on its own (%v):\n%s", i, err, doc)
				}
			}
		})
	}
}

func TestForceAbort(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		format   output.Format
		stdinTTY bool
		answer   string
		wantOut  string // the whole of stdout, or for JSON the message
		wantErr  string
		wantSent *falconv1.AbortExpRequest // nil: no call
	}{
		{name: "forced: the table says what may be left behind", args: []string{"exp-stuck", "--force", "--reason", "cluster deleted", "--yes"}, format: output.Table,
			wantOut:  "exp-stuck: force-aborted (Aborted); its clusters have not confirmed the stop, so what they started may run until they do (the controller keeps asking)\n",
			wantSent: &falconv1.AbortExpRequest{Id: "exp-stuck", Reason: "cluster deleted", Force: true}},
		{name: "forced, as JSON", args: []string{"exp-stuck", "--force", "--yes"}, format: output.JSON,
			wantOut:  "experiment exp-stuck is aborted without waiting for its clusters; what they started may run until they confirm the stop, which the controller keeps asking for",
			wantSent: &falconv1.AbortExpRequest{Id: "exp-stuck", Force: true}},
		{name: "without --force an Aborting experiment stays so", args: []string{"exp-stuck", "--yes"}, format: output.Table,
			wantOut:  "exp-stuck: nothing changed: experiment exp-stuck is already Aborting; nothing to abort\n",
			wantSent: &falconv1.AbortExpRequest{Id: "exp-stuck"}},
		{name: "the question warns, and no is no", args: []string{"exp-stuck", "--force"}, format: output.Table, stdinTTY: true, answer: "n\n",
			wantErr: "cancelled: nothing was aborted"},
		{name: "the question warns, and yes forces", args: []string{"exp-stuck", "--force"}, format: output.Table, stdinTTY: true, answer: "y\n",
			wantOut:  "exp-stuck: force-aborted (Aborted); its clusters have not confirmed the stop, so what they started may run until they do (the controller keeps asking)\n",
			wantSent: &falconv1.AbortExpRequest{Id: "exp-stuck", Force: true}},
		{name: "no terminal, no --yes: refused before any call", args: []string{"exp-stuck", "--force"}, format: output.Table,
			wantErr: "--yes: required when stdin is not a terminal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newAPI()
			url := clitest.Start(t, api)
			f, s := clitest.NewFactory(t, url, tt.format)
			s.IO.SetStdinTTY(tt.stdinTTY)
			s.In.WriteString(tt.answer)
			err := clitest.Execute(NewCmdAbort(f, nil), tt.args...)
			reqs := api.Requests("AbortExp")
			switch {
			case tt.wantSent == nil && len(reqs) != 0:
				t.Errorf("AbortExp called %d times, want none", len(reqs))
			case tt.wantSent != nil && len(reqs) != 1:
				t.Fatalf("AbortExp called %d times, want once", len(reqs))
			case tt.wantSent != nil:
				if diff := cmp.Diff(tt.wantSent, reqs[0], protocmp.Transform()); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
			}
			if tt.stdinTTY && !strings.Contains(s.ErrOut.String()+s.Out.String(), "Force-abort exp-stuck? Falcon will not wait for the clusters to stop them") {
				t.Errorf("the question does not warn:\nstdout %q\nstderr %q", s.Out, s.ErrOut)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.format != output.JSON {
				if got := s.Out.String(); !strings.HasSuffix(got, tt.wantOut) {
					t.Errorf("output = %q, want it to end with %q", got, tt.wantOut)
				}
				return
			}
			var got struct {
				Changed    bool   `json:"changed"`
				Message    string `json:"message"`
				Experiment struct {
					Status string `json:"status"`
				} `json:"experiment"`
			}
			if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil || !got.Changed || got.Message != tt.wantOut || got.Experiment.Status != "Aborted" {
				t.Errorf("json = %s (%v)", s.Out, err)
			}
		})
	}
}
