package create

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

func TestNewCmdCreateFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Options
		wantErr string
	}{
		{name: "manifest", args: []string{"-f", "m.yaml"}, want: Options{Filename: "m.yaml"}},
		{name: "manifest from stdin", args: []string{"--filename", "-"}, want: Options{Filename: "-"}},
		{
			name: "flag form",
			args: []string{"--name", "n", "--cluster", "c", "--type", "profiling", "--role-to-task-spec", "t.yaml", "--config", "cfg.yaml", "--priority", "3", "--tag", "a", "--tag", "b,c"},
			want: Options{Name: "n", Cluster: "c", ExpType: "profiling", TasksFile: "t.yaml", ConfigFile: "cfg.yaml", Priority: 3, Tags: []string{"a", "b", "c"}},
		},
		{name: "-f with a flag-form flag", args: []string{"-f", "m.yaml", "--name", "n"}, wantErr: "--name: cannot be combined with -f/--filename"},
		{name: "-f with --tag", args: []string{"-f", "m.yaml", "--tag", "x"}, wantErr: "--tag: cannot be combined with -f/--filename"},
		{name: "nothing", args: nil, wantErr: "-f/--filename: required"},
		{name: "flag form without tasks", args: []string{"--name", "n", "--cluster", "c"}, wantErr: "--role-to-task-spec: required with the flag form (--name, --cluster given)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := clitest.NewFactory(t, clitest.DownURL(t), output.JSON)
			var got *Options
			cmd := NewCmdCreate(f, func(_ context.Context, o *Options) error { got = o; return nil })
			err := clitest.Execute(cmd, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				if !errors.Is(err, errdefs.ErrInvalid) {
					t.Errorf("error %v is not InvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *got, cmpopts.IgnoreFields(Options{}, "IO", "Client", "Printer"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// echoAPI creates whatever it is sent, with an ID and status Created.
func echoAPI() *clitest.API {
	return &clitest.API{
		CreateExpFunc: func(_ context.Context, r *falconv1.CreateExpRequest) (*falconv1.Experiment, error) {
			e := proto.Clone(r.GetExperiment()).(*falconv1.Experiment)
			e.Id, e.Status = "exp-q7odgo8q9x", "Created"
			return e, nil
		},
	}
}

const manifestYAML = `
name: hello
exp_type: benchmark
cluster_name: local
tags: [example]
config: |
  model: qwen
role_to_task_spec:
  worker:
    command: echo hi
    replica: 2
    envs: {LOG_LEVEL: info}
`

var manifestExp = &falconv1.Experiment{
	Name: "hello", ExpType: "benchmark", ClusterName: "local", Tags: []string{"example"}, Config: "model: qwen\n",
	RoleToTaskSpec: map[string]*falconv1.TaskSpec{"worker": {Command: "echo hi", Replica: 2, Envs: map[string]string{"LOG_LEVEL": "info"}}},
}

func TestCreateFromManifest(t *testing.T) {
	api := echoAPI()
	url := clitest.Start(t, api)
	path := writeFile(t, "m.yaml", manifestYAML)

	f, s := clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdCreate(f, nil), "-f", path); err != nil {
		t.Fatal(err)
	}
	reqs := api.Requests("CreateExp")
	if len(reqs) != 1 {
		t.Fatalf("CreateExp called %d times", len(reqs))
	}
	want := &falconv1.CreateExpRequest{Experiment: manifestExp}
	if diff := cmp.Diff(want, reqs[0], protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if got := s.Out.String(); got != "Created experiment exp-q7odgo8q9x \"hello\" on cluster local (Created)\n" {
		t.Errorf("table output = %q", got)
	}
	if !strings.Contains(s.ErrOut.String(), "falcon exp wait exp-q7odgo8q9x") {
		t.Errorf("stderr lacks the follow-up hint: %q", s.ErrOut)
	}

	// JSON: the created experiment and nothing else on stdout.
	f, s = clitest.NewFactory(t, url, output.JSON)
	s.In.WriteString(manifestYAML)
	if err := clitest.Execute(NewCmdCreate(f, nil), "-f", "-"); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, s.Out)
	}
	if got["id"] != "exp-q7odgo8q9x" || got["exp_type"] != "benchmark" || got["status"] != "Created" {
		t.Errorf("JSON = %v", got)
	}
}

func TestCreateFlagForm(t *testing.T) {
	api := echoAPI()
	url := clitest.Start(t, api)
	tasks := writeFile(t, "tasks.yaml", "main:\n  command: echo \"cfg=$CUSTOM_CONFIG_KEY\"\n  replica: 1\n")
	// The config is stored verbatim, comments and all.
	cfg := writeFile(t, "cfg.yaml", "# profiling\nmodel: qwen/qwen3-32b\nrandom_input_len: 16384\n")

	f, _ := clitest.NewFactory(t, url, output.JSON)
	err := clitest.Execute(NewCmdCreate(f, nil), "--name", "model-profiling-001", "--cluster", "local", "--type", "profiling",
		"--role-to-task-spec", tasks, "--config", cfg, "--priority", "2", "--tag", "a")
	if err != nil {
		t.Fatal(err)
	}
	want := &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: "model-profiling-001", ClusterName: "local", ExpType: "profiling", Priority: 2, Tags: []string{"a"},
		Config:         "# profiling\nmodel: qwen/qwen3-32b\nrandom_input_len: 16384\n",
		RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "echo \"cfg=$CUSTOM_CONFIG_KEY\"", Replica: 1}},
	}}
	if diff := cmp.Diff(want, api.Requests("CreateExp")[0], protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

func TestCreateErrors(t *testing.T) {
	api := echoAPI()
	api.CreateExpFunc = func(context.Context, *falconv1.CreateExpRequest) (*falconv1.Experiment, error) {
		return nil, status.Error(codes.InvalidArgument, "name: must be a DNS-1123 label")
	}
	url := clitest.Start(t, api)
	tests := []struct {
		name     string
		args     []string
		wantCode codes.Code
		want     []string
	}{
		{
			name:     "unknown field in the manifest",
			args:     []string{"-f", writeFile(t, "bad.yaml", "name: a\nrole_to_task_spec:\n  w:\n    replicas: 2\n")},
			wantCode: codes.InvalidArgument,
			want:     []string{"bad.yaml: role_to_task_spec.w.replicas: unknown field"},
		},
		{
			name:     "several problems are listed one per line",
			args:     []string{"-f", writeFile(t, "bad.yaml", "nmae: a\npriority: high\n")},
			wantCode: codes.InvalidArgument,
			want:     []string{"bad.yaml: 2 problems:\n  nmae: unknown field", "\n  priority: must be an integer"},
		},
		{
			name:     "bad tasks file",
			args:     []string{"--name", "n", "--role-to-task-spec", writeFile(t, "tasks.yaml", "w:\n  replica: two\n")},
			wantCode: codes.InvalidArgument,
			want:     []string{"tasks.yaml: role_to_task_spec.w.replica: must be an integer, got \"two\""},
		},
		{
			name:     "missing manifest file",
			args:     []string{"-f", filepath.Join(t.TempDir(), "nope.yaml")},
			wantCode: codes.InvalidArgument,
			want:     []string{"--filename: open", "nope.yaml"},
		},
		{
			name:     "server-side validation",
			args:     []string{"-f", writeFile(t, "m.yaml", "name: My_Exp\n")},
			wantCode: codes.InvalidArgument,
			want:     []string{"name: must be a DNS-1123 label"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, s := clitest.NewFactory(t, url, output.JSON)
			err := clitest.Execute(NewCmdCreate(f, nil), tt.args...)
			if code := errdefs.Code(err); code != tt.wantCode {
				t.Errorf("code = %v (%v), want %v", code, err, tt.wantCode)
			}
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if s.Out.Len() != 0 {
				t.Errorf("stdout = %q, want nothing on error", s.Out)
			}
		})
	}
	if n := len(api.Requests("CreateExp")); n != 1 {
		t.Errorf("CreateExp called %d times; only the manifest that parsed should reach the server", n)
	}
}

func TestGenerateName(t *testing.T) {
	taken := map[string]bool{"hello-aaaaa": true}
	api := &clitest.API{
		CreateExpFunc: func(_ context.Context, r *falconv1.CreateExpRequest) (*falconv1.Experiment, error) {
			if n := r.GetExperiment().GetName(); taken[n] {
				return nil, status.Errorf(codes.AlreadyExists, "name: %q is already used by experiment exp-0000000000", n)
			}
			e := proto.Clone(r.GetExperiment()).(*falconv1.Experiment)
			e.Id, e.Status = "exp-q7odgo8q9x", "Created"
			return e, nil
		},
	}
	url := clitest.Start(t, api)
	path := writeFile(t, "m.yaml", manifestYAML)
	f, s := clitest.NewFactory(t, url, output.Table)
	suffixes := []string{"aaaaa", "bbbbb"}
	cmd := NewCmdCreate(f, func(ctx context.Context, o *Options) error {
		o.Suffix = func() string { s := suffixes[0]; suffixes = suffixes[1:]; return s }
		return createRun(ctx, o)
	})
	if err := clitest.Execute(cmd, "-f", path, "--generate-name"); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range api.Requests("CreateExp") {
		names = append(names, r.(*falconv1.CreateExpRequest).GetExperiment().GetName())
	}
	if diff := cmp.Diff([]string{"hello-aaaaa", "hello-bbbbb"}, names); diff != "" {
		t.Errorf("names tried (-want +got):\n%s", diff)
	}
	if !strings.Contains(s.Out.String(), `"hello-bbbbb"`) {
		t.Errorf("output = %q", s.Out)
	}

	// Without --generate-name a taken name is the server's error as is.
	taken["hello"] = true
	f, _ = clitest.NewFactory(t, url, output.Table)
	err := clitest.Execute(NewCmdCreate(f, nil), "-f", path)
	if errdefs.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), "exp-0000000000") {
		t.Errorf("err = %v, want AlreadyExists naming the holder", err)
	}

	for _, tt := range []struct{ base, want string }{
		{"hello", "hello-x1y2z"},
		{"", "exp-x1y2z"},
		{strings.Repeat("a", 56) + "-b-c", strings.Repeat("a", 56) + "-x1y2z"}, // no dash left before the suffix's
		{strings.Repeat("a", 50) + "-bcdefghij", strings.Repeat("a", 50) + "-bcdefg-x1y2z"},
	} {
		got := GeneratedName(tt.base, "x1y2z")
		if got != tt.want || len(got) > 63 {
			t.Errorf("GeneratedName(%q) = %q, want %q", tt.base, got, tt.want)
		}
	}
}
