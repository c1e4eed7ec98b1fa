package cli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/cli/contexts"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/errdefs"
)

// invokeWith runs the CLI with exactly env as its environment.
func invokeWith(env map[string]string, stdoutTTY bool, args ...string) result {
	ios, _, out, errOut := iostreams.Test()
	ios.SetStdoutTTY(stdoutTTY)
	code := run(context.Background(), args, ios, func(k string) string { return env[k] })
	return result{code, out.String(), errOut.String()}
}

func TestGlobalFlags(t *testing.T) {
	api := testAPI()
	api.ListJobsFunc = func(_ context.Context, r *falconv1.ListJobsRequest) (*falconv1.ListJobsResponse, error) {
		if r.GetPageSize() > 1000 {
			return nil, status.Errorf(codes.InvalidArgument, "page_size: must be between 0 (default 50) and 1000, got %d", r.GetPageSize())
		}
		return &falconv1.ListJobsResponse{Items: []*falconv1.Job{{Id: "job-1", Status: "Pending", Reason: "Waiting", Message: "queued: position 2"}}}, nil
	}
	url := clitest.Start(t, api)
	dir := t.TempDir()
	cfg := filepath.Join(dir, contexts.FileName)
	writeFile(t, cfg, "current-context: broken\ncontexts:\n  good: {server: "+url+"}\n  broken: {}\n")
	base := map[string]string{ServerEnv: url}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	noServer := map[string]string{contexts.DirEnv: dir}

	tests := []struct {
		name       string
		env        map[string]string
		tty        bool
		args       []string
		wantCode   int
		wantStdout string // exact, unless "" (then not checked)
		wantStderr string // substring
	}{
		{name: "--jq picks a field, strings bare", env: base, args: []string{"exp", "list", "--jq", ".items[].id"}, wantStdout: "exp-q7odgo8q9x\n"},
		{name: "--jq implies json on a terminal", env: base, tty: true, args: []string{"exp", "get", "exp-q7odgo8q9x", "--jq", "{id, status}"}, wantStdout: `{"id":"exp-q7odgo8q9x","status":"Running"}` + "\n"},
		{name: "--jq syntax error exits 2 and shows it", env: base, args: []string{"exp", "list", "--jq", ".items["}, wantCode: errdefs.ExitInvalid, wantStderr: `Error: --jq: ".items[": unexpected EOF`},
		{name: "--jq with -o table is refused", env: base, args: []string{"exp", "list", "--jq", ".", "-o", "table"}, wantCode: errdefs.ExitInvalid, wantStderr: "--jq: filters JSON output; it cannot be combined with -o table"},
		{name: "--jq on a command without a document", env: base, args: []string{"auth", "token", "--jq", "."}, wantCode: errdefs.ExitInvalid, wantStderr: "--jq: falcon auth token prints no JSON document"},
		{name: "--jq on a stream, per line", env: base, args: []string{"exp", "events", "exp-failed", "--jq", ".status"}, wantStdout: "Failed\n"},
		{name: "-o name", env: base, args: []string{"exp", "list", "-o", "name"}, wantStdout: "exp-q7odgo8q9x\n"},
		{name: "-o wide shows why a job waits", env: base, args: []string{"job", "list", "-o", "wide"}, wantStderr: "", wantStdout: "ID     EXP  ROLE  CLUSTER  STATUS   REASON   REPLICA  AGE  NODE POOL  MESSAGE\njob-1  -    -     -        Pending  Waiting  0        -    -          queued: position 2\n"},
		{name: "FALCON_OUTPUT is the default", env: with(OutputEnv, "name"), tty: true, args: []string{"exp", "list"}, wantStdout: "exp-q7odgo8q9x\n"},
		{name: "-o beats FALCON_OUTPUT", env: with(OutputEnv, "name"), args: []string{"exp", "list", "--jq", ".items | length"}, wantStdout: "1\n"},
		{name: "a bad FALCON_OUTPUT is named", env: with(OutputEnv, "xml"), args: []string{"exp", "list"}, wantCode: errdefs.ExitInvalid, wantStderr: `FALCON_OUTPUT: unknown output format "xml"; allowed: table, wide, json, yaml, md, name`},
		{name: "NO_COLOR on a terminal", env: with("NO_COLOR", "1"), tty: true, args: []string{"exp", "list"}, wantStdout: "ID              NAME  TYPE       CLUSTER  STATUS   REASON  AGE  CREATOR\nexp-q7odgo8q9x  -     benchmark  -        Running  -       -    -\n"},
		{name: "--color=never on a terminal", env: base, tty: true, args: []string{"exp", "list", "--color=never"}, wantStdout: "ID              NAME  TYPE       CLUSTER  STATUS   REASON  AGE  CREATOR\nexp-q7odgo8q9x  -     benchmark  -        Running  -       -    -\n"},
		{name: "--color=always in a pipe", env: with("NO_COLOR", "1"), args: []string{"exp", "list", "-o", "table", "--color=always"}, wantStdout: "ID              NAME  TYPE       CLUSTER  STATUS   REASON  AGE  CREATOR\nexp-q7odgo8q9x  -     benchmark  -        \x1b[34mRunning\x1b[0m  -       -    -\n"},
		{name: "a bad --color", env: base, args: []string{"exp", "list", "--color=sometimes"}, wantCode: errdefs.ExitInvalid, wantStderr: "must be one of auto, always, never"},
		{name: "a server's field error names the flag typed", env: base, args: []string{"job", "list", "--limit", "5000"}, wantCode: errdefs.ExitInvalid, wantStderr: "Error: --limit: must be between 0 (default 50) and 1000, got 5000\n"},
		{name: "a current-context naming no server", env: noServer, args: []string{"exp", "list"}, wantCode: errdefs.ExitInvalid, wantStderr: `current-context: context "broken" in ` + cfg + " names no server; set one with `falcon config set-context broken --server URL`"},
		{name: "--context picks a server", env: noServer, args: []string{"exp", "list", "--context", "good", "-o", "name"}, wantStdout: "exp-q7odgo8q9x\n"},
		{name: "FALCON_CONTEXT picks a server", env: map[string]string{contexts.DirEnv: dir, contexts.ContextEnv: "good"}, args: []string{"exp", "list", "-o", "name"}, wantStdout: "exp-q7odgo8q9x\n"},
		{name: "an unknown FALCON_CONTEXT", env: map[string]string{contexts.DirEnv: dir, contexts.ContextEnv: "nope"}, args: []string{"exp", "list"}, wantCode: errdefs.ExitInvalid, wantStderr: `FALCON_CONTEXT: no context named "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := invokeWith(tt.env, tt.tty, tt.args...)
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			if tt.wantStdout != "" && r.stdout != tt.wantStdout {
				t.Errorf("stdout = %q\nwant     %q", r.stdout, tt.wantStdout)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("stderr = %q\nwant it to contain %q", r.stderr, tt.wantStderr)
			}
		})
	}
}

func TestExperimentNamesWhereIDsGo(t *testing.T) {
	api := testAPI()
	api.ListExpsFunc = func(_ context.Context, r *falconv1.ListExpsRequest) (*falconv1.ListExpsResponse, error) {
		if r.GetName() == "my-run" {
			return &falconv1.ListExpsResponse{Items: []*falconv1.Experiment{{Id: "exp-q7odgo8q9x", Name: "my-run"}}}, nil
		}
		return &falconv1.ListExpsResponse{}, nil
	}
	api.ListJobsFunc = func(_ context.Context, r *falconv1.ListJobsRequest) (*falconv1.ListJobsResponse, error) {
		return &falconv1.ListJobsResponse{Items: []*falconv1.Job{{Id: "job-1", ExpId: r.GetExpId()}}}, nil
	}
	url := clitest.Start(t, api)
	env := map[string]string{ServerEnv: url}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "a name", args: []string{"exp", "get", "my-run", "--jq", ".id"}, wantStdout: "exp-q7odgo8q9x\n"},
		{name: "an ID needs no lookup", args: []string{"exp", "get", "exp-q7odgo8q9x", "--jq", ".id"}, wantStdout: "exp-q7odgo8q9x\n"},
		{name: "explain takes a name", args: []string{"exp", "explain", "my-run", "--jq", ".exp_id"}, wantStdout: "exp-q7odgo8q9x\n"},
		{name: "--exp takes a name", args: []string{"job", "list", "--exp", "my-run", "--jq", ".items[].exp_id"}, wantStdout: "exp-q7odgo8q9x\n"},
		{name: "several, mixed", args: []string{"exp", "wait", "my-run", "exp-failed", "--any", "--jq", ".id"}, wantCode: errdefs.ExitNotSucceeded},
		{name: "an unknown name", args: []string{"exp", "get", "nope"}, wantCode: errdefs.ExitNotFound, wantStderr: `Error: no experiment is named "nope", and it is no experiment ID`},
		{name: "a pattern is no name", args: []string{"exp", "get", "my-*"}, wantCode: errdefs.ExitInvalid, wantStderr: `argument my-*: "my-*": name one experiment`},
		{name: "cp takes a name", args: []string{"exp", "cp", "my-run:", "./x"}, wantCode: errdefs.ExitInvalid, wantStderr: `name a path after the experiment's colon, e.g. exp-q7odgo8q9x:/tmp/x`},
		{name: "cp takes a name before a relative path", args: []string{"exp", "cp", "./x", "nope:rel/x"}, wantCode: errdefs.ExitNotFound, wantStderr: `no experiment is named "nope"`},
		{name: "cp says how a local path with a colon is written", args: []string{"exp", "cp", "nope:rel/x", "./x"}, wantCode: errdefs.ExitNotFound, wantStderr: `is written ./nope:rel/x`},
		{name: "cp leaves a local file with a colon local", args: []string{"exp", "cp", "a:b", "./x"}, wantCode: errdefs.ExitInvalid, wantStderr: `both "a:b" and "./x" are local`},
	}
	t.Chdir(t.TempDir())
	if err := os.WriteFile("a:b", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := invokeWith(env, false, tt.args...)
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			if tt.wantStdout != "" && r.stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", r.stdout, tt.wantStdout)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("stderr = %q\nwant it to contain %q", r.stderr, tt.wantStderr)
			}
		})
	}
	var got []string
	for _, req := range api.Requests("GetExp") {
		got = append(got, req.(*falconv1.GetExpRequest).GetId())
	}
	for _, id := range got {
		if id != "exp-q7odgo8q9x" && id != "exp-failed" {
			t.Errorf("GetExp asked for %q: a name reached the API as an ID", id)
		}
	}
}

// Every command of exp, artifact, analyze and report whose arguments start
// with an experiment (the Use line's first argument in capitals) takes its
// name as well as its ID: it is in expArgs, which the root resolves.
// `exp explain` was once left out, and its own example, by name, failed.
func TestEveryExperimentArgumentTakesAName(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		path := c.CommandPath()
		top := strings.Fields(path)
		if !c.Runnable() || len(top) < 3 || !slices.Contains([]string{"exp", "artifact", "analyze", "report"}, top[1]) {
			return
		}
		fields := strings.Fields(c.Use)
		if len(fields) < 2 {
			return
		}
		first := fields[1]
		if first != strings.ToUpper(first) || strings.ContainsAny(first[:1], "{[-") {
			return // no positional argument, or one that is optional or a choice
		}
		if expArgs[path] == 0 {
			t.Errorf("%s (%q) takes an experiment first, but is not in expArgs: a name there is sent to the server as an ID", path, c.Use)
		}
	}
	walk(CommandTree())
}
