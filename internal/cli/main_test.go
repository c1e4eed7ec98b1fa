package cli

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/errdefs"
)

type result struct {
	code           int
	stdout, stderr string
}

// invoke runs the CLI as a process would, with FALCON_SERVER set to server.
func invoke(t *testing.T, server string, stdoutTTY bool, args ...string) result {
	t.Helper()
	ios, _, out, errOut := iostreams.Test()
	ios.SetStdoutTTY(stdoutTTY)
	env := map[string]string{ServerEnv: server}
	code := run(context.Background(), args, ios, func(k string) string { return env[k] })
	return result{code, out.String(), errOut.String()}
}

func testAPI() *clitest.API {
	return &clitest.API{
		GetExpFunc: func(_ context.Context, r *falconv1.GetExpRequest) (*falconv1.Experiment, error) {
			switch r.GetId() {
			case "exp-q7odgo8q9x":
				return &falconv1.Experiment{Id: r.GetId(), ExpType: "benchmark", Status: "Running"}, nil
			case "exp-failed":
				return &falconv1.Experiment{Id: r.GetId(), Status: "Failed", Reason: "RoleFailed"}, nil
			}
			return nil, status.Errorf(codes.NotFound, "experiment %q not found", r.GetId())
		},
		WatchExpFunc: func(r *falconv1.WatchExpRequest, s grpc.ServerStreamingServer[falconv1.ExpEvent]) error {
			switch r.GetId() {
			case "exp-q7odgo8q9x":
				if err := s.Send(&falconv1.ExpEvent{Seq: 1, ExpId: r.GetId(), Kind: "experiment", Id: r.GetId(), Status: "Running"}); err != nil {
					return err
				}
				<-s.Context().Done()
				return nil
			case "exp-failed":
				return s.Send(&falconv1.ExpEvent{Seq: 1, ExpId: r.GetId(), Kind: "experiment", Id: r.GetId(), Status: "Failed", Reason: "RoleFailed", Terminal: true})
			}
			return status.Errorf(codes.NotFound, "experiment %q not found", r.GetId())
		},
		ListExpsFunc: func(_ context.Context, r *falconv1.ListExpsRequest) (*falconv1.ListExpsResponse, error) {
			if r.GetName() != "" {
				return &falconv1.ListExpsResponse{}, nil // no experiment here has a name
			}
			return &falconv1.ListExpsResponse{Items: []*falconv1.Experiment{{Id: "exp-q7odgo8q9x", ExpType: "benchmark", Status: "Running"}}, NextPageToken: ""}, nil
		},
		CreateExpFunc: func(context.Context, *falconv1.CreateExpRequest) (*falconv1.Experiment, error) {
			return nil, status.Error(codes.InvalidArgument, "role_to_task_spec.w.replica: must be at least 1, got 0")
		},
		AbortExpFunc: func(context.Context, *falconv1.AbortExpRequest) (*falconv1.AbortExpResponse, error) {
			return nil, status.Error(codes.FailedPrecondition, "experiment is being deleted")
		},
	}
}

func TestExitCodes(t *testing.T) {
	url := clitest.Start(t, testAPI())
	down := clitest.DownURL(t)
	manifest := t.TempDir() + "/m.yaml"
	writeFile(t, manifest, "name: a\nrole_to_task_spec:\n  w: {command: x, replica: 0}\n")
	badManifest := t.TempDir() + "/bad.yaml"
	writeFile(t, badManifest, "name: a\nrole_to_task_spec:\n  w: {command: x, replicas: 1}\n")

	tests := []struct {
		name       string
		server     string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"ok", url, []string{"exp", "get", "exp-q7odgo8q9x"}, errdefs.ExitOK, ""},
		{"not found", url, []string{"exp", "get", "exp-0000000000"}, errdefs.ExitNotFound, `Error: experiment "exp-0000000000" not found` + "\n"},
		{"invalid on the server", url, []string{"exp", "create", "-f", manifest}, errdefs.ExitInvalid, "Error: role_to_task_spec.w.replica: must be at least 1, got 0\n"},
		{"invalid manifest", url, []string{"exp", "create", "-f", badManifest}, errdefs.ExitInvalid, "role_to_task_spec.w.replicas: unknown field"},
		{"wrong state", url, []string{"exp", "abort", "exp-1", "--yes"}, errdefs.ExitPrecondition, "Error: experiment is being deleted\n"},
		{"server down", down, []string{"exp", "list"}, errdefs.ExitUnavailable, "Error: cannot reach Falcon server at " + down},
		{"--server wins over the environment", down, []string{"exp", "get", "exp-q7odgo8q9x", "--server", url}, errdefs.ExitOK, ""},
		{"wait: not succeeded", url, []string{"exp", "wait", "exp-failed"}, errdefs.ExitNotSucceeded, "Error: experiment exp-failed ended Failed (RoleFailed)\n"},
		{"wait: timeout", url, []string{"exp", "wait", "exp-q7odgo8q9x", "--timeout", "1ns"}, errdefs.ExitTimeout, "timed out after 1ns waiting for exp-q7odgo8q9x to end; last seen status Running"},
		{"bad status flag", url, []string{"exp", "list", "--status", "done"}, errdefs.ExitInvalid, "allowed: Created, Running"},
		{"no --yes without a terminal", url, []string{"exp", "abort", "exp-1"}, errdefs.ExitInvalid, "--yes: required"},
		{"unknown flag", url, []string{"exp", "get", "x", "--bogus"}, errdefs.ExitInvalid, "Error: unknown flag: --bogus\nRun 'falcon exp get --help' for usage.\n"},
		{"missing argument", url, []string{"exp", "get"}, errdefs.ExitInvalid, "Error: accepts 1 arg(s), received 0\n"},
		{"unknown command", url, []string{"bogus"}, errdefs.ExitInvalid, `Error: unknown command "bogus" for "falcon"`},
		{"unknown subcommand", url, []string{"exp", "lsit"}, errdefs.ExitInvalid, `unknown command "lsit" for "falcon exp"; did you mean list`},
		{"bad output format", url, []string{"exp", "list", "-o", "xml"}, errdefs.ExitInvalid, `invalid argument "xml" for "-o, --output" flag: must be one of table, wide, json, yaml, md, name`},
		{"bad duration", url, []string{"exp", "wait", "x", "--timeout", "soon"}, errdefs.ExitInvalid, `invalid argument "soon" for "--timeout"`},
		{"bad --leader-elect", down, []string{"controller", "--leader-elect", "sometimes"}, errdefs.ExitInvalid, `Error: --leader-elect: "sometimes" is not supported; allowed: auto, lease, mysql, off`},
		{"mysql election without a DSN", down, []string{"controller", "--leader-elect", "mysql", "--leader-elect-dsn", ""}, errdefs.ExitInvalid, "Error: --leader-elect-dsn: is required with --leader-elect mysql"},
		{"lease duration not above the renew deadline", down, []string{"controller", "--leader-elect", "mysql", "--leader-elect-dsn", "root@tcp(127.0.0.1:1)/x", "--leader-elect-renew-deadline", "9s"}, errdefs.ExitInvalid, "Error: --leader-elect-lease-duration: must exceed the renew deadline (9s), got 8s"},
		{"help", url, []string{"--help"}, errdefs.ExitOK, ""},
		{"group without a verb shows help", url, []string{"exp"}, errdefs.ExitOK, ""},
		{"aliases", url, []string{"experiment", "ls"}, errdefs.ExitOK, ""},
		{"version needs no server", down, []string{"version"}, errdefs.ExitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := invoke(t, tt.server, true, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			if tt.wantStderr == "" && r.stderr != "" {
				t.Errorf("stderr = %q, want nothing", r.stderr)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("stderr = %q\nwant it to contain %q", r.stderr, tt.wantStderr)
			}
		})
	}
}

func TestErrorsAsJSON(t *testing.T) {
	url := clitest.Start(t, testAPI())
	r := invoke(t, url, true, "exp", "get", "exp-0000000000", "-o", "json")
	if r.code != errdefs.ExitNotFound {
		t.Fatalf("exit %d", r.code)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing on error", r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if lines[0] != `Error: experiment "exp-0000000000" not found` {
		t.Errorf("first stderr line = %q", lines[0])
	}
	var got struct {
		Error struct {
			Code     string `json:"code"`
			Message  string `json:"message"`
			ExitCode int    `json:"exit_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("last stderr line is not JSON: %v\n%s", err, r.stderr)
	}
	if got.Error.Code != "NotFound" || got.Error.Message != `experiment "exp-0000000000" not found` || got.Error.ExitCode != 3 {
		t.Errorf("JSON error = %+v", got.Error)
	}

	// Table output keeps stderr to the one human line.
	r = invoke(t, url, true, "exp", "get", "exp-0000000000")
	if r.stderr != "Error: experiment \"exp-0000000000\" not found\n" {
		t.Errorf("table stderr = %q", r.stderr)
	}

	// exp wait's own outcomes carry their kind.
	r = invoke(t, url, false, "exp", "wait", "exp-failed")
	if !strings.Contains(r.stderr, `"code":"NotSucceeded"`) || !strings.Contains(r.stderr, `"exit_code":7`) {
		t.Errorf("wait stderr = %q", r.stderr)
	}
}

func TestDefaultOutputFollowsTheTerminal(t *testing.T) {
	url := clitest.Start(t, testAPI())
	piped := invoke(t, url, false, "exp", "list")
	var list map[string]any
	if err := json.Unmarshal([]byte(piped.stdout), &list); err != nil {
		t.Fatalf("piped stdout is not JSON: %v\n%s", err, piped.stdout)
	}
	if _, ok := list["next_page_token"]; !ok {
		t.Errorf("list JSON lacks next_page_token: %v", list)
	}
	tty := invoke(t, url, true, "exp", "list")
	if !strings.HasPrefix(tty.stdout, "ID ") || !strings.Contains(tty.stdout, "\x1b[34mRunning\x1b[0m") {
		t.Errorf("terminal stdout = %q, want a table with the status coloured", tty.stdout)
	}
	forced := invoke(t, url, false, "exp", "list", "-o", "table")
	if want := strings.NewReplacer("\x1b[34m", "", "\x1b[0m", "").Replace(tty.stdout); forced.stdout != want {
		t.Errorf("-o table = %q, want the table without colour %q", forced.stdout, want)
	}
	yaml := invoke(t, url, true, "exp", "get", "exp-q7odgo8q9x", "--output", "YAML")
	if !strings.Contains(yaml.stdout, "exp_type: benchmark\n") {
		t.Errorf("yaml = %q", yaml.stdout)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestHelpGoesToStdout(t *testing.T) {
	r := invoke(t, clitest.DownURL(t), true, "exp", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "Create, inspect, follow and stop experiments") || !strings.Contains(r.stdout, "wait") {
		t.Errorf("exp --help: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}
