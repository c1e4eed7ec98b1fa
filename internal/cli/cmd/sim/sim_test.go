package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

func TestFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"neither source", nil, "--trace: is required"},
		{"both sources", []string{"--trace", "t.jsonl", "--from-db"}, "--trace: conflicts with --from-db"},
		{"bad since", []string{"--from-db", "--since", "a week"}, `--since: "a week" is neither a duration (10m, 36h, 7d) nor an RFC 3339 time`},
		{"negative since", []string{"--from-db", "--since", "-2h"}, "--since: the duration must be positive"},
		{"since without from-db", []string{"--trace", "t.jsonl", "--since", "7d"}, "--since: only applies with --from-db"},
		{"bad out format", []string{"--trace", "t.jsonl", "--out-format", "xlsx"}, `--out-format: "xlsx": allowed: csv, parquet`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := clitest.NewFactory(t, clitest.DownURL(t), output.Table)
			ran := false
			err := clitest.Execute(NewCmdSim(f, func(*Options) error { ran = true; return nil }), tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
			if errdefs.Code(err) != codes.InvalidArgument {
				t.Errorf("code %v, want InvalidArgument", errdefs.Code(err))
			}
			if ran {
				t.Error("ran despite the bad flags")
			}
		})
	}
}

// history writes jobs straight into the server's store, with the times a
// replay reads, as the resource manager would have left them.
type histJob struct {
	user, accel, topo string
	hosts             int32
	ago               time.Duration // created this long before now
	wait, run         time.Duration // 0 run: never started
	cluster           string
	pinned            bool
}

func writeHistory(t *testing.T, env *apitest.Env, now time.Time, jobs []histJob) {
	t.Helper()
	ctx := context.Background()
	for i, h := range jobs {
		created := now.Add(-h.ago)
		spec := store.TaskSpec{Command: "python train.py --secret-flag", Replica: h.hosts, DeviceType: h.accel, DeviceTopo: h.topo,
			Envs: map[string]string{"TOKEN": "not for the simulator"}}
		exp := &store.Experiment{ID: ids.New(ids.Experiment), Name: fmt.Sprintf("hist-%d", i), ExpType: "train", Status: lifecycle.Succeeded,
			RoleToTaskSpec: map[string]store.TaskSpec{"main": spec}, Creator: h.user, CreatorID: "u-" + h.user, CreatedAt: created, UpdatedAt: created}
		j := &store.Job{ID: ids.New(ids.Job), ExpID: exp.ID, ExpName: exp.Name, Role: "main", ClusterName: h.cluster, ExpType: "train",
			TaskSpec: spec, Status: lifecycle.Succeeded, Creator: h.user, CreatedAt: created, UpdatedAt: created}
		if h.run > 0 {
			start, end := created.Add(h.wait), created.Add(h.wait+h.run)
			j.StartedAt, j.FinishedAt = &start, &end
		} else {
			j.Status = lifecycle.Aborted
		}
		if h.pinned {
			j.Selection = fmt.Sprintf(`{"selected_cluster":%q,"reason":"selected %s: the job is pinned to it (the experiment's cluster_name)"}`, h.cluster, h.cluster)
		}
		if err := env.Store.CreateExp(ctx, exp, []*store.Job{j}, &store.Artifact{ID: ids.New(ids.Artifact), ExpID: exp.ID,
			Path: "file:///tmp/" + exp.Name, ArtifactType: "local", Status: lifecycle.Created, CreatedAt: created, UpdatedAt: created}); err != nil {
			t.Fatal(err)
		}
	}
}

// Against a real API server whose local user is its admin, as in falcon
// dev: the history since --since is replayed, jobs that cannot be are
// counted, and pinned jobs keep their cluster.
func TestFromDB(t *testing.T) {
	env := apitest.Start(t, nil)
	now := time.Now()
	writeHistory(t, env, now, []histJob{
		{user: "old@example.com", accel: "v5p", topo: "2x2x1", hosts: 1, ago: 10 * 24 * time.Hour, wait: time.Minute, run: time.Hour, cluster: "edge-a"},
		{user: "ana@example.com", accel: "v5p", topo: "2x2x4", hosts: 4, ago: 3 * 24 * time.Hour, wait: 7 * time.Minute, run: 45 * time.Minute, cluster: "edge-a"},
		{user: "bob@example.com", accel: "v5p", topo: "2x2x1", hosts: 1, ago: 2 * 24 * time.Hour, wait: 6 * time.Minute, run: 20 * time.Minute, cluster: "edge-b", pinned: true},
		{user: "ana@example.com", accel: "v5p", topo: "2x2x4", hosts: 4, ago: 2*24*time.Hour - time.Hour, wait: time.Minute, run: 30 * time.Minute, cluster: "edge-a"},
		{user: "cy@example.com", accel: "v5p", topo: "2x2x1", hosts: 1, ago: 24 * time.Hour, cluster: ""},                                      // aborted while waiting
		{user: "cy@example.com", accel: "", topo: "", hosts: 1, ago: 12 * time.Hour, wait: time.Second, run: time.Minute, cluster: "cpu-pool"}, // CPU
	})
	f, s := clitest.NewFactory(t, "http://"+env.HTTPAddr, output.JSON)
	if err := clitest.Execute(NewCmdSim(f, nil), "--from-db", "--since", "7d", "--policy", "spec", "--policy", "per-job"); err != nil {
		t.Fatalf("%v\nstderr: %s", err, s.ErrOut)
	}
	var got struct {
		Trace    string `json:"trace"`
		Policies []struct {
			Policy       string `json:"policy"`
			Jobs         int    `json:"jobs"`
			PoolsCreated int    `json:"pools_created"`
			Users        []struct {
				User string `json:"user"`
				Jobs int    `json:"jobs"`
			} `json:"users"`
			Clusters []struct {
				Cluster      string `json:"cluster"`
				PoolsCreated int    `json:"pools_created"`
			} `json:"clusters"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, s.Out)
	}
	if len(got.Policies) != 2 || got.Trace != "jobs table since 7d" {
		t.Fatalf("output %s", s.Out)
	}
	perJob := got.Policies[1]
	if perJob.Jobs != 3 || perJob.PoolsCreated != 3 {
		t.Errorf("per-job replayed %d jobs and created %d pools, want the 3 that ran in the last 7 days", perJob.Jobs, perJob.PoolsCreated)
	}
	users := map[string]int{}
	for _, u := range perJob.Users {
		users[u.User] = u.Jobs
	}
	if users["ana@example.com"] != 2 || users["bob@example.com"] != 1 || len(users) != 2 {
		t.Errorf("users %v, want ana's 2 jobs and bob's 1", users)
	}
	// The simulated clusters are the history's; bob's job was pinned to
	// edge-b, so it created its pool there.
	clusters := map[string]int{}
	for _, c := range perJob.Clusters {
		clusters[c.Cluster] = c.PoolsCreated
	}
	if _, ok := clusters["edge-a"]; !ok || clusters["edge-b"] < 1 || len(clusters) != 2 {
		t.Errorf("clusters %v, want edge-a and edge-b with bob's pool on edge-b", clusters)
	}
	if want := "2 of 5 jobs since "; !strings.Contains(s.ErrOut.String(), want) ||
		!strings.Contains(s.ErrOut.String(), "1 never started, 1 not on a TPU") {
		t.Errorf("stderr %q, want the 2 jobs left out and why", s.ErrOut)
	}
}

// someone is a fixed, authenticated user who is not an admin.
type someone struct{}

func (someone) Authenticate(context.Context, map[string][]string) (auth.Principal, error) {
	return auth.Principal{UserID: "u-bob", Email: "bob@example.com", Kind: auth.KindUser}, nil
}

func TestFromDBRefusedToNonAdmins(t *testing.T) {
	env := apitest.Start(t, nil, apiserver.WithAuthenticator(someone{}))
	f, s := clitest.NewFactory(t, "http://"+env.HTTPAddr, output.Table)
	err := clitest.Execute(NewCmdSim(f, nil), "--from-db")
	if errdefs.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "ListJobHistory: an admin is required") {
		t.Errorf("error = %v, want PermissionDenied saying ListJobHistory needs an admin", err)
	}
	if s.Out.String() != "" {
		t.Errorf("printed %q", s.Out)
	}
}
