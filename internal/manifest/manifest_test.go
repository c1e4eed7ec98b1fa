package manifest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
)

const fullManifest = `
name: llama-bench-3
exp_type: benchmark
cluster_name: v7x-east
priority: 5
tags: [llama, nightly]
config: |
  model: llama3-8b
  batch: 32
timeout_seconds: 7200
role_to_task_spec:
  worker:
    command: |
      python bench.py
      echo done
    replica: 2
    image: us-docker.pkg.dev/p/falcon/jax:latest
    device_count: 8
    device_type: v7x
    device_topo: 2x2x2
    supply_mode: flex-start
    slices: 2
    envs:
      PORT: 8080
      DEBUG: true
      RATIO: 0.5
      NAME: bench
      EMPTY:
  eval:
    command: python eval.py
    replica: 1
    device_type: cpu
    timeout_seconds: 0
    resources:
      requests: {cpu: 2, memory: 4Gi, ephemeral-storage: "10Gi"}
      limits: {cpu: 4.5, memory: 8Gi}
`

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *falconv1.Experiment
	}{
		{
			name: "full manifest, top-level timeout fills roles without one",
			in:   fullManifest,
			want: &falconv1.Experiment{
				Name:        "llama-bench-3",
				ExpType:     "benchmark",
				ClusterName: "v7x-east",
				Priority:    5,
				Tags:        []string{"llama", "nightly"},
				Config:      "model: llama3-8b\nbatch: 32\n",
				RoleToTaskSpec: map[string]*falconv1.TaskSpec{
					"worker": {
						Command:        "python bench.py\necho done\n",
						Replica:        2,
						Image:          "us-docker.pkg.dev/p/falcon/jax:latest",
						DeviceCount:    8,
						DeviceType:     "v7x",
						DeviceTopo:     "2x2x2",
						SupplyMode:     "flex-start",
						Slices:         2,
						TimeoutSeconds: 7200,
						Envs:           map[string]string{"PORT": "8080", "DEBUG": "true", "RATIO": "0.5", "NAME": "bench", "EMPTY": ""},
					},
					"eval": {
						Command: "python eval.py", Replica: 1, DeviceType: "cpu", TimeoutSeconds: 0,
						Resources: &falconv1.Resources{
							Requests: map[string]string{"cpu": "2", "memory": "4Gi", "ephemeral-storage": "10Gi"},
							Limits:   map[string]string{"cpu": "4.5", "memory": "8Gi"},
						},
					},
				},
			},
		},
		{
			name: "timeout_seconds after role_to_task_spec still applies",
			in: `
name: a
role_to_task_spec:
  main: {command: "true", replica: 1}
timeout_seconds: 60
`,
			want: &falconv1.Experiment{
				Name:           "a",
				RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1, TimeoutSeconds: 60}},
			},
		},
		{
			name: "config written as a mapping is re-serialised to YAML text",
			in: `
name: a
config:
  model: llama
  layers: [1, 2]
`,
			want: &falconv1.Experiment{Name: "a", Config: "model: llama\nlayers: [1, 2]\n"},
		},
		{
			name: "a value left empty in config stays null, not the empty string",
			in:   "name: a\nconfig:\n  model: llama\n  checkpoint:\n",
			want: &falconv1.Experiment{Name: "a", Config: "model: llama\ncheckpoint: null\n"},
		},
		{
			name: "JSON is YAML too",
			in:   `{"name": "a", "role_to_task_spec": {"worker": {"replica": 4, "command": "run"}}}`,
			want: &falconv1.Experiment{Name: "a", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"worker": {Replica: 4, Command: "run"}}},
		},
		{
			name: "anchors and aliases",
			in: `
name: a
role_to_task_spec:
  a: &spec {command: run, replica: 1}
  b: *spec
`,
			want: &falconv1.Experiment{Name: "a", RoleToTaskSpec: map[string]*falconv1.TaskSpec{
				"a": {Command: "run", Replica: 1},
				"b": {Command: "run", Replica: 1},
			}},
		},
		{
			name: "resources with limits only; unknown names and bad quantities are left to validation",
			in: `
role_to_task_spec:
  prep:
    resources:
      limits: {memory: 1Gi, gpu: lots}
`,
			want: &falconv1.Experiment{RoleToTaskSpec: map[string]*falconv1.TaskSpec{
				"prep": {Resources: &falconv1.Resources{Limits: map[string]string{"memory": "1Gi", "gpu": "lots"}}},
			}},
		},
		{
			name: "null resources are unset",
			in:   "role_to_task_spec:\n  prep:\n    resources: ~\n",
			want: &falconv1.Experiment{RoleToTaskSpec: map[string]*falconv1.TaskSpec{"prep": {}}},
		},
		{
			name: "nulls are unset",
			in:   "name: a\ntags:\nconfig: ~\nrole_to_task_spec:\n",
			want: &falconv1.Experiment{Name: "a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// want are substrings of the error, each naming a path and what is wrong.
		want []string
	}{
		{
			name: "unknown task spec field names the full path and the allowed fields",
			in:   "name: a\nrole_to_task_spec:\n  worker:\n    replicas: 2\n",
			want: []string{"role_to_task_spec.worker.replicas: unknown field; did you mean replica? allowed: command, replica, image, device_count, device_type, device_topo, envs, timeout_seconds, supply_mode, resources, slices (line 4)"},
		},
		{
			name: "a negative top-level timeout is reported where it was written, once",
			in:   "name: a\ntimeout_seconds: -5\nrole_to_task_spec:\n  w: {command: x, replica: 1}\n  v: {command: x, replica: 1}\n",
			want: []string{"timeout_seconds: must be 0 (no limit) or positive, got -5 (line 2)"},
		},
		{
			name: "unknown resources field names its path",
			in:   "role_to_task_spec:\n  prep:\n    resources:\n      request: {cpu: 1}\n",
			want: []string{"role_to_task_spec.prep.resources.request: unknown field; did you mean requests? allowed: requests, limits (line 4)"},
		},
		{
			name: "ttl must be a Go duration",
			in:   "name: a\nttl: 2 hours\nidle_ttl: 30\nrole_to_task_spec:\n  w: {command: x, replica: 1}\n",
			want: []string{`ttl: must be a duration such as 2h, 90m or 1h30m, got "2 hours" (line 2)`,
				"idle_ttl: must be a duration such as 2h, 90m or 1h30m, got 30 (line 3)"},
		},
		{
			name: "interactive must be a boolean",
			in:   "name: a\ninteractive: yes please\nrole_to_task_spec:\n  w: {command: x, replica: 1}\n",
			want: []string{"interactive: must be true or false, got"},
		},
		{
			name: "resources must be a mapping",
			in:   "role_to_task_spec:\n  prep:\n    resources: 2\n",
			want: []string{"role_to_task_spec.prep.resources: must be a mapping, got 2 (line 3)"},
		},
		{
			name: "requests must be a mapping",
			in:   "role_to_task_spec:\n  prep:\n    resources:\n      requests: [cpu]\n",
			want: []string{"role_to_task_spec.prep.resources.requests: must be a mapping, got a list (line 4)"},
		},
		{
			name: "a quantity must be a string or number",
			in:   "role_to_task_spec:\n  prep:\n    resources:\n      limits:\n        cpu: true\n        memory:\n        ephemeral-storage: {size: 1Gi}\n",
			want: []string{
				"role_to_task_spec.prep.resources.limits.cpu: must be a quantity such as 2, 500m or 4Gi, got true (line 5)",
				"role_to_task_spec.prep.resources.limits.memory: must be a quantity such as 2, 500m or 4Gi, got null (line 6)",
				"role_to_task_spec.prep.resources.limits.ephemeral-storage: must be a quantity such as 2, 500m or 4Gi, got a mapping (line 7)",
			},
		},
		{
			name: "unknown top-level field",
			in:   "name: a\nresources: {cpu: 1}\n",
			want: []string{"resources: unknown field; allowed: name, exp_type, cluster_name, priority, tags, config, role_to_task_spec, timeout_seconds, metrics, ttl, idle_ttl, interactive (line 2)"},
		},
		{
			name: "read-only fields are unknown in a manifest",
			in:   "name: a\nstatus: Running\n",
			want: []string{"status: unknown field"},
		},
		{
			name: "integer given as a word",
			in:   "role_to_task_spec:\n  worker:\n    replica: two\n",
			want: []string{`role_to_task_spec.worker.replica: must be an integer, got "two" (line 3)`},
		},
		{
			name: "integer given as a quoted number",
			in:   "priority: \"2\"\n",
			want: []string{`priority: must be an integer, got "2"`},
		},
		{
			name: "integer given as a float",
			in:   "timeout_seconds: 1.5\n",
			want: []string{`timeout_seconds: must be an integer, got 1.5`},
		},
		{
			name: "int32 overflow",
			in:   "role_to_task_spec:\n  w:\n    device_count: 99999999999\n",
			want: []string{"role_to_task_spec.w.device_count: must be an integer between -2147483648 and 2147483647, got 99999999999"},
		},
		{
			name: "string given a mapping",
			in:   "name: {first: a}\n",
			want: []string{"name: must be a string, got a mapping (line 1)"},
		},
		{
			name: "tags must be a list",
			in:   "tags: nightly\n",
			want: []string{`tags: must be a list of strings, got "nightly"`},
		},
		{
			name: "tag item must be a scalar",
			in:   "tags: [a, [b]]\n",
			want: []string{"tags[1]: must be a string, got a list"},
		},
		{
			name: "env value must be a scalar",
			in:   "role_to_task_spec:\n  w:\n    envs:\n      A: [1]\n",
			want: []string{"role_to_task_spec.w.envs.A: must be a string, number or boolean, got a list (line 4)"},
		},
		{
			name: "role must be a mapping",
			in:   "role_to_task_spec:\n  worker: python run.py\n",
			want: []string{`role_to_task_spec.worker: must be a mapping, got "python run.py"`},
		},
		{
			name: "role_to_task_spec must be a mapping",
			in:   "role_to_task_spec: [a]\n",
			want: []string{"role_to_task_spec: must be a mapping, got a list"},
		},
		{
			name: "duplicate key",
			in:   "name: a\nname: b\n",
			want: []string{"name: duplicate key (first at line 1) (line 2)"},
		},
		{
			name: "every problem is reported at once",
			in:   "nmae: a\npriority: high\nrole_to_task_spec:\n  w:\n    image: [x]\n",
			want: []string{"nmae: unknown field", `priority: must be an integer, got "high"`, "role_to_task_spec.w.image: must be a string, got a list"},
		},
		{
			name: "malformed YAML names the line",
			in:   "name: a\nrole_to_task_spec:\n  worker:\n    replica: 1\n   command: x\n",
			want: []string{"manifest: malformed YAML: line 2: did not find expected key"},
		},
		{
			name: "tabs",
			in:   "name: a\n\tpriority: 1\n",
			want: []string{"manifest: malformed YAML: line 2"},
		},
		{
			name: "empty file",
			in:   "# nothing here\n",
			want: []string{"manifest: is empty"},
		},
		{
			name: "not a mapping",
			in:   "- a\n- b\n",
			want: []string{"manifest: must be a mapping, got a list"},
		},
		{
			name: "two documents",
			in:   "name: a\n---\nname: b\n",
			want: []string{"manifest: holds more than one YAML document (the second starts at line 2)"},
		},
		{
			name: "merge keys",
			in:   "base: &b {replica: 1}\n",
			want: []string{"base: unknown field"},
		},
		{
			name: "config may not use an anchor defined outside it: its text would hold the alias alone",
			in:   "tags: &t [a]\nconfig:\n  x: *t\n",
			want: []string{"config: uses the anchor &t defined outside config; config is stored as text, where that anchor does not exist: define it inside config or write the value out (line 3)"},
		},
		{
			name: "merge keys inside a role",
			in:   "role_to_task_spec:\n  w:\n    <<: {replica: 1}\n",
			want: []string{"role_to_task_spec.w.<<: YAML merge keys are not supported"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("Parse succeeded with %v, want an error", got)
			}
			checkInvalid(t, err, tt.want)
		})
	}
}

func checkInvalid(t *testing.T, err error, want []string) {
	t.Helper()
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("error %v is not errdefs.ErrInvalid", err)
	}
	var fe errdefs.FieldErrors
	if !errors.As(err, &fe) {
		t.Errorf("error %T is not errdefs.FieldErrors", err)
	}
	if len(fe) != len(want) {
		t.Errorf("got %d field errors, want %d: %v", len(fe), len(want), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q\ndoes not contain %q", err, w)
		}
	}
}

func TestParseTasks(t *testing.T) {
	got, err := ParseTasks([]byte(`
worker:
  command: python train.py
  replica: 4
  device_type: v7x
  envs: {SEED: 1}
prep:
  command: python prep.py
  resources: {requests: {cpu: "2"}}
main:
  command: "true"
`))
	if err != nil {
		t.Fatalf("ParseTasks: %v", err)
	}
	want := map[string]*falconv1.TaskSpec{
		"worker": {Command: "python train.py", Replica: 4, DeviceType: "v7x", Envs: map[string]string{"SEED": "1"}},
		"prep":   {Command: "python prep.py", Resources: &falconv1.Resources{Requests: map[string]string{"cpu": "2"}}},
		"main":   {Command: "true"},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("ParseTasks mismatch (-want +got):\n%s", diff)
	}
}

func TestParseTasksErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"unknown field uses the manifest path", "worker:\n  replicas: 2\n", []string{"role_to_task_spec.worker.replicas: unknown field"}},
		{"unknown resources field uses the manifest path", "prep:\n  resources: {cpu: 1}\n", []string{"role_to_task_spec.prep.resources.cpu: unknown field; allowed: requests, limits"}},
		{"a manifest passed as a tasks file", "name: a\nrole_to_task_spec: {}\n", []string{"role_to_task_spec: the tasks file holds a whole manifest (role_to_task_spec at line 2); pass it with -f instead"}},
		{"role is not a mapping", "worker: run.sh\n", []string{`role_to_task_spec.worker: must be a mapping, got "run.sh" (line 1)`}},
		{"empty", "", []string{"role_to_task_spec: is empty"}},
		{"malformed", "worker: [\n", []string{"role_to_task_spec: malformed YAML: line"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTasks([]byte(tt.in))
			if err == nil {
				t.Fatal("ParseTasks succeeded, want an error")
			}
			checkInvalid(t, err, tt.want)
		})
	}
}

func TestParseTTL(t *testing.T) {
	exp, err := Parse([]byte("name: dbg\nttl: 2h\nidle_ttl: 20m\ninteractive: true\nrole_to_task_spec:\n  w: {replica: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if exp.GetTtl().AsDuration() != 2*time.Hour || exp.GetIdleTtl().AsDuration() != 20*time.Minute || !exp.GetInteractive() {
		t.Fatalf("ttl %v, idle_ttl %v, interactive %v", exp.GetTtl(), exp.GetIdleTtl(), exp.GetInteractive())
	}
}
