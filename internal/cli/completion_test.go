package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
)

func TestCompletion(t *testing.T) {
	api := testAPI()
	api.ListExpsFunc = func(_ context.Context, r *falconv1.ListExpsRequest) (*falconv1.ListExpsResponse, error) {
		all := []*falconv1.Experiment{
			{Id: "exp-q7odgo8q9x", Name: "bench-1", Status: "Running", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"worker": {Replica: 2}}},
			{Id: "exp-2222222222", Name: "train", Status: "Failed"},
		}
		var out []*falconv1.Experiment
		for _, e := range all {
			if p, ok := strings.CutSuffix(r.GetName(), "*"); !ok || strings.HasPrefix(e.GetName(), p) {
				out = append(out, e)
			}
		}
		return &falconv1.ListExpsResponse{Items: out}, nil
	}
	api.GetExpFunc = func(_ context.Context, r *falconv1.GetExpRequest) (*falconv1.Experiment, error) {
		return &falconv1.Experiment{Id: r.GetId(), RoleToTaskSpec: map[string]*falconv1.TaskSpec{"worker": {Replica: 2}, "server": {Replica: 1}}}, nil
	}
	api.ListJobsFunc = func(context.Context, *falconv1.ListJobsRequest) (*falconv1.ListJobsResponse, error) {
		return &falconv1.ListJobsResponse{Items: []*falconv1.Job{{Id: "job-ki5t2jegpi", ExpName: "bench-1", Role: "worker", Status: "Pending"}}}, nil
	}
	api.ListClustersFunc = func(context.Context, *falconv1.ListClustersRequest) (*falconv1.ListClustersResponse, error) {
		return &falconv1.ListClustersResponse{Items: []*falconv1.Cluster{{Name: "local", Backend: "local", Status: "active"}, {Name: "v7x-east", Backend: "gke", Status: "active"}}}, nil
	}
	url := clitest.Start(t, api)
	env := map[string]string{ServerEnv: url}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"experiment IDs", []string{"exp", "get", ""}, []string{"exp-q7odgo8q9x\tbench-1 Running", "exp-2222222222\ttrain Failed"}},
		{"an ID's start", []string{"exp", "abort", "exp-2"}, []string{"exp-2222222222\ttrain Failed"}},
		{"names", []string{"exp", "logs", "ben"}, []string{"bench-1\texp-q7odgo8q9x Running"}},
		{"every argument of wait", []string{"exp", "wait", "exp-q7odgo8q9x", "exp-2"}, []string{"exp-2222222222\ttrain Failed"}},
		{"only exec's first argument", []string{"exp", "exec", "exp-q7odgo8q9x", ""}, nil},
		{"cp's remote side", []string{"exp", "cp", "./x", "exp-q"}, []string{"exp-q7odgo8q9x:/\tbench-1 Running"}},
		{"--exp", []string{"job", "list", "--exp", "exp-q"}, []string{"exp-q7odgo8q9x\tbench-1 Running"}},
		{"job IDs", []string{"job", "get", "job-"}, []string{"job-ki5t2jegpi\tbench-1 worker Pending"}},
		{"roles", []string{"exp", "logs", "exp-q7odgo8q9x", "--role", ""}, []string{"server\t1 replicas", "worker\t2 replicas"}},
		{"ranks of a role", []string{"exp", "exec", "exp-q7odgo8q9x", "--role", "worker", "--rank", ""}, []string{"0", "1"}},
		{"clusters", []string{"exp", "list", "--cluster", "v"}, []string{"v7x-east\tgke active"}},
		{"a cluster argument", []string{"cluster", "get", ""}, []string{"local\tlocal active", "v7x-east\tgke active"}},
		{"experiment statuses", []string{"exp", "list", "--status", "a"}, []string{"Aborting", "Aborted"}},
		{"job statuses", []string{"job", "list", "--status", "p"}, []string{"Pending"}},
		{"-o values", []string{"exp", "list", "-o", ""}, []string{"table", "wide", "json", "yaml", "md", "name"}},
		{"--color values", []string{"exp", "list", "--color", "a"}, []string{"auto", "always"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := invokeWith(env, false, append([]string{"__complete"}, tt.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			got := lines[:len(lines)-1] // the last line is cobra's directive, ":4"
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("completions (-want +got):\n%s", diff)
			}
		})
	}
	// An unreachable server completes nothing, quickly, and says so only
	// to cobra (the error directive), not to the shell's line.
	r := invokeWith(map[string]string{ServerEnv: clitest.DownURL(t)}, false, "__complete", "exp", "get", "")
	if r.code != 0 || !strings.HasSuffix(strings.TrimSpace(r.stdout), ":1") {
		t.Errorf("down server: exit %d stdout %q", r.code, r.stdout)
	}
}
