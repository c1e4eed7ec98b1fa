package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/placement"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/apitest"
	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

// stores are the two databases the server runs on.
var stores = []struct {
	name string
	open func(testing.TB, ...sqlstore.Option) *sqlstore.Store
}{{"SQLite", dbtest.NewSQLite}, {"MariaDB", dbtest.NewMySQL}}

// TestCreateRefusesWhatNoCandidateCanRun: what the registered clusters
// could only let wait or fail after the fact is refused at create and at
// validate (the same path), over gRPC and HTTP, as InvalidArgument naming
// the field, and nothing is written.
func TestCreateRefusesWhatNoCandidateCanRun(t *testing.T) {
	for _, db := range stores {
		t.Run(db.name, func(t *testing.T) {
			st := db.open(t)
			ctx := context.Background()
			for _, c := range []*store.Cluster{
				{Name: "local", Backend: "local"},
				{Name: "tpu-east", Backend: "gke", AcceleratorTypes: []string{"v7x"},
					Spec: store.ClusterSpec{GKECluster: "tpu-east", Accelerators: []store.AcceleratorSlot{{Type: "v7x", Priority: 1}}}},
			} {
				c.ID, c.Status, c.CreatedAt = ids.New(ids.Cluster), store.ClusterActive, time.Now().UTC()
				if _, err := st.UpsertCluster(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			env := apitest.StartWith(t, apitest.Options{Store: st})

			tpu := func(mut func(*falconv1.TaskSpec)) *falconv1.Experiment {
				ts := &falconv1.TaskSpec{Command: "python train.py", Image: "python:3.12", Replica: 2, DeviceType: "v7x", DeviceTopo: "2x2x2"}
				mut(ts)
				return &falconv1.Experiment{Name: "refused", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": ts}}
			}
			hugeEnvs := map[string]string{}
			for i := range 21 {
				hugeEnvs[fmt.Sprintf("E%02d", i)] = strings.Repeat("e", 100<<10)
			}
			tests := []struct {
				name  string
				exp   *falconv1.Experiment
				field string   // the message starts with it
				says  []string // and says these
			}{
				{"no image where only a GKE cluster offers the type",
					tpu(func(t *falconv1.TaskSpec) { t.Image = "" }),
					"role_to_task_spec.main.image: ", []string{"is required", "tpu-east", "backend gke"}},
				{"pinned cluster does not offer the type",
					func() *falconv1.Experiment {
						e := tpu(func(t *falconv1.TaskSpec) { t.DeviceType, t.DeviceTopo, t.Replica = "h100", "", 1 })
						e.ClusterName = "tpu-east"
						return e
					}(),
					"role_to_task_spec.main.device_type: ", []string{"nvidia-h100-80gb cannot run on cluster_name tpu-east", "it offers v7x", "leave cluster_name empty"}},
				{"pinned to local for a type a GKE cluster offers",
					func() *falconv1.Experiment { e := tpu(func(*falconv1.TaskSpec) {}); e.ClusterName = "local"; return e }(),
					"role_to_task_spec.main.device_type: ", []string{"cluster_name local", "(tpu-east)"}},
				{"command longer than one argument",
					tpu(func(t *falconv1.TaskSpec) { t.Command = strings.Repeat("x", placement.MaxArgStrlen) }),
					"role_to_task_spec.main.command: ", []string{"is 131072 bytes", "the limit is 131071", "MAX_ARG_STRLEN"}},
				{"an exec beyond ARG_MAX on the local fallback",
					tpu(func(t *falconv1.TaskSpec) {
						t.Image, t.DeviceType, t.DeviceTopo, t.Replica, t.Envs = "", "", "", 1, hugeEnvs
					}),
					"role_to_task_spec.main.command: ", []string{"the local backend (local) needs at least 2150", "over its limit of 2097152", "ARG_MAX"}},
				{"a Job beyond etcd's limit on the GKE cluster",
					tpu(func(t *falconv1.TaskSpec) { t.Envs = hugeEnvs }),
					"role_to_task_spec.main.command: ", []string{"the gke backend (tpu-east) needs at least", "over its limit of 1572864"}},
			}
			for _, tt := range tests {
				for _, validate := range []bool{false, true} {
					req := &falconv1.CreateExpRequest{Experiment: tt.exp, ValidateOnly: validate}
					t.Run(fmt.Sprintf("%s/validate_only=%t", tt.name, validate), func(t *testing.T) {
						_, err := env.Exps.CreateExp(ctx, req)
						st := status.Convert(err)
						if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), tt.field) {
							t.Fatalf("gRPC: %.400v; want InvalidArgument starting %q", err, tt.field)
						}
						for _, s := range tt.says {
							if !strings.Contains(st.Message(), s) {
								t.Errorf("gRPC message %.400q lacks %q", st.Message(), s)
							}
						}
						code, msg := postExp(t, env, req)
						if code != http.StatusBadRequest || !strings.HasPrefix(msg, tt.field) {
							t.Errorf("HTTP: %d %.400q; want 400 starting %q", code, msg, tt.field)
						}
					})
				}
			}

			// Nothing half-written: no experiment, job or artifact.
			exps, err := env.Exps.ListExps(ctx, &falconv1.ListExpsRequest{})
			if err != nil || len(exps.GetItems()) != 0 {
				t.Fatalf("experiments after refusals: %v, %v; want none", exps.GetItems(), err)
			}
			jobs, _, err := st.ListJobs(ctx, store.JobFilter{})
			if err != nil || len(jobs) != 0 {
				t.Fatalf("jobs after refusals: %d, %v; want none", len(jobs), err)
			}
			arts, _, err := st.ListArtifacts(ctx, store.ArtifactFilter{})
			if err != nil || len(arts) != 0 {
				t.Fatalf("artifacts after refusals: %d, %v; want none", len(arts), err)
			}

			// What some candidate can run is accepted.
			for name, e := range map[string]*falconv1.Experiment{
				"tpu-with-image": tpu(func(*falconv1.TaskSpec) {}),
				// cpu is offered by no registered cluster: local takes it, no image needed
				"cpu-on-local": tpu(func(t *falconv1.TaskSpec) { t.Image, t.DeviceType, t.DeviceTopo, t.Replica = "", "", "", 1 }),
				"cpu-pinned-local": func() *falconv1.Experiment {
					e := tpu(func(t *falconv1.TaskSpec) { t.Image, t.DeviceType, t.DeviceTopo, t.Replica = "", "cpu", "", 1 })
					e.ClusterName = "local"
					return e
				}(),
				"longest-command": tpu(func(t *falconv1.TaskSpec) { t.Command = strings.Repeat("x", placement.MaxArgStrlen-1) }),
			} {
				e.Name = name
				if _, err := env.Exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: e}); err != nil {
					t.Errorf("%s: %.300v, want created", name, err)
				}
			}
		})
	}
}

// postExp sends req to the gateway and returns the HTTP status and the
// error message, if any.
func postExp(t *testing.T, env *apitest.Env, req *falconv1.CreateExpRequest) (int, string) {
	t.Helper()
	body, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+env.HTTPAddr+"/v1/experiments", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("HTTP %d, non-JSON body %.200q", resp.StatusCode, raw)
	}
	return resp.StatusCode, out.Message
}
