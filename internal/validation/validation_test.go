package validation

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
)

func valid() *falconv1.Experiment {
	return &falconv1.Experiment{
		Name:    "model-profiling-001",
		ExpType: "profiling",
		Tags:    []string{"team=serving", "v7x"},
		Config:  "model: qwen",
		RoleToTaskSpec: map[string]*falconv1.TaskSpec{
			"main": {Command: "echo hi", Replica: 2, DeviceType: "v7x", DeviceTopo: "2x2x2", Envs: map[string]string{"LOG_LEVEL": "info"}},
		},
	}
}

func TestExperiment(t *testing.T) {
	known := func(c string) bool { return c == "local" }
	tests := []struct {
		name   string
		mutate func(e *falconv1.Experiment)
		fields []string // expected field paths in the error; empty = valid
	}{
		{"valid", func(e *falconv1.Experiment) {}, nil},
		{"known cluster", func(e *falconv1.Experiment) { e.ClusterName = "local" }, nil},
		{"missing name", func(e *falconv1.Experiment) { e.Name = "" }, []string{"name"}},
		{"upper-case name", func(e *falconv1.Experiment) { e.Name = "Model" }, []string{"name"}},
		{"name too long", func(e *falconv1.Experiment) { e.Name = strings.Repeat("a", 64) }, []string{"name"}},
		{"name ends with dash", func(e *falconv1.Experiment) { e.Name = "a-" }, []string{"name"}},
		{"bad exp_type", func(e *falconv1.Experiment) { e.ExpType = "Profiling!" }, []string{"exp_type"}},
		{"unknown cluster", func(e *falconv1.Experiment) { e.ClusterName = "nope" }, []string{"cluster_name"}},
		{"bad tag", func(e *falconv1.Experiment) { e.Tags = []string{"ok", " bad"} }, []string{"tags[1]"}},
		{"config over 1 MiB", func(e *falconv1.Experiment) { e.Config = strings.Repeat("x", MaxConfigBytes+1) }, []string{"config"}},
		{"config exactly 1 MiB", func(e *falconv1.Experiment) { e.Config = strings.Repeat("x", MaxConfigBytes) }, nil},
		{"no roles", func(e *falconv1.Experiment) { e.RoleToTaskSpec = nil }, []string{"role_to_task_spec"}},
		{"metric patterns", func(e *falconv1.Experiment) {
			e.Metrics = []*falconv1.MetricSpec{{Name: "step_time", Pattern: `step_time: (?P<value>[0-9.]+)`, Better: "lower"}}
		}, nil},
		{"metric pattern that does not compile", func(e *falconv1.Experiment) {
			e.Metrics = []*falconv1.MetricSpec{{Name: "loss", Pattern: `loss=(?P<value>[0-9.]+`}}
		}, []string{"metrics[0].pattern"}},
		{"metric pattern without a value group", func(e *falconv1.Experiment) {
			e.Metrics = []*falconv1.MetricSpec{{Name: "ok", Pattern: `x=(?P<value>\d+)`}, {Name: "loss", Pattern: `loss=([0-9.]+)`, Better: "smaller"}}
		}, []string{"metrics[1].better", "metrics[1].pattern"}},
		{"bad role name", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["Main_Role"] = &falconv1.TaskSpec{Command: "x", Replica: 1}
		}, []string{"role_to_task_spec.Main_Role"}},
		{"nil task", func(e *falconv1.Experiment) { e.RoleToTaskSpec["w"] = nil }, []string{"role_to_task_spec.w"}},
		{"empty command", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].Command = "  \n" }, []string{"role_to_task_spec.main.command"}},
		{"ttl", func(e *falconv1.Experiment) {
			e.Ttl, e.IdleTtl = durationpb.New(2*time.Hour), durationpb.New(10*time.Minute)
		}, nil},
		{"zero ttl", func(e *falconv1.Experiment) { e.Ttl = durationpb.New(0) }, []string{"ttl"}},
		{"negative idle_ttl", func(e *falconv1.Experiment) { e.IdleTtl = durationpb.New(-time.Minute) }, []string{"idle_ttl"}},
		{"interactive needs no command", func(e *falconv1.Experiment) {
			e.Interactive, e.Ttl, e.RoleToTaskSpec["main"].Command = true, durationpb.New(time.Hour), ""
		}, nil},
		{"interactive without a ttl", func(e *falconv1.Experiment) { e.Interactive = true }, []string{"ttl"}},
		{"replica zero", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].Replica = 0 }, []string{"role_to_task_spec.main.replica"}},
		{"replica negative", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].Replica = -1 }, []string{"role_to_task_spec.main.replica"}},
		{"negative timeout", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].TimeoutSeconds = -5 }, []string{"role_to_task_spec.main.timeout_seconds"}},
		{"v6e 2x2 on one host", func(e *falconv1.Experiment) {
			t := e.RoleToTaskSpec["main"]
			t.DeviceType, t.DeviceTopo, t.Replica = "v6e", "2x2", 1
		}, nil},
		{"2D topology on v7x", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].DeviceTopo = "2x2" }, []string{"role_to_task_spec.main.device_topo"}},
		{"replica does not match the slice", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].DeviceTopo = "2x2x4" }, []string{"role_to_task_spec.main.replica"}},
		{"v7x device_count counts devices", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].DeviceCount = 4 }, []string{"role_to_task_spec.main.device_count"}},
		{"v7x device_count 8 per host", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].DeviceCount = 8 }, nil},
		{"unknown device type", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].DeviceType = "v9z" }, []string{"role_to_task_spec.main.device_type"}},
		{"topology without device type", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].DeviceType = "" }, []string{"role_to_task_spec.main.device_topo"}},
		{"topology 4", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].DeviceTopo = "4" }, []string{"role_to_task_spec.main.device_topo"}},
		{"topology 2x0x1", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].DeviceTopo = "2x0x1" }, []string{"role_to_task_spec.main.device_topo"}},
		{"topology 2x2x2x2", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].DeviceTopo = "2x2x2x2" }, []string{"role_to_task_spec.main.device_topo"}},
		{"device_count without device_type", func(e *falconv1.Experiment) {
			t := e.RoleToTaskSpec["main"]
			t.DeviceType, t.DeviceTopo, t.Replica, t.DeviceCount = "", "", 1, 8
		}, []string{"role_to_task_spec.main.device_count"}},
		{"negative device_count", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].DeviceCount = -8 }, []string{"role_to_task_spec.main.device_count"}},
		{"negative device_count is not checked twice", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"].DeviceCount = -8
			e.RoleToTaskSpec["main"].DeviceTopo = "2x2x4"
		}, []string{"role_to_task_spec.main.device_count"}},
		{"bad supply mode", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].SupplyMode = "spot" }, []string{"role_to_task_spec.main.supply_mode"}},
		{"four slices", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].Slices = 4 }, nil},
		{"one slice", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].Slices = 1 }, nil},
		{"negative slices", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].Slices = -1 }, []string{"role_to_task_spec.main.slices"}},
		{"too many slices", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].Slices = MaxSlices + 1 }, []string{"role_to_task_spec.main.slices"}},
		{"slices over the host limit", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"].Slices, e.RoleToTaskSpec["main"].Replica, e.RoleToTaskSpec["main"].DeviceTopo = 64, 32, "4x4x8"
		}, []string{"role_to_task_spec.main.slices"}},
		{"slices of a GPU task", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"] = &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "nvidia-h100-80gb", Slices: 2}
		}, []string{"role_to_task_spec.main.slices"}},
		{"slices of a CPU task", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"] = &falconv1.TaskSpec{Command: "x", Replica: 1, Slices: 2}
		}, []string{"role_to_task_spec.main.slices"}},
		{"multi-slice env set by the task", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"].Slices = 2
			e.RoleToTaskSpec["main"].Envs = map[string]string{"MEGASCALE_SLICE_ID": "3"}
		}, []string{"role_to_task_spec.main.envs.MEGASCALE_SLICE_ID"}},
		{"megascale env on one slice is the task's own", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"].Envs = map[string]string{"MEGASCALE_SLICE_ID": "3"}
		}, nil},
		{"bad env name", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].Envs["1BAD"] = "x" }, []string{"role_to_task_spec.main.envs.1BAD"}},
		{"reserved env", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].Envs["FALCON_RANK"] = "9" }, []string{"role_to_task_spec.main.envs.FALCON_RANK"}},
		{"resources on a CPU-only role", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["prep"] = &falconv1.TaskSpec{Command: "python prep.py", Replica: 1, DeviceType: "cpu", Resources: &falconv1.Resources{
				Requests: map[string]string{"cpu": "2", "memory": "4Gi", "ephemeral-storage": "10G"},
				Limits:   map[string]string{"cpu": "4", "memory": "8Gi"},
			}}
		}, nil},
		{"resources next to an accelerator", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"].Resources = &falconv1.Resources{Requests: map[string]string{"memory": "200Gi"}}
		}, nil},
		{"limits alone, a limit equal to its request", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"].Resources = &falconv1.Resources{
				Requests: map[string]string{"cpu": "500m"},
				Limits:   map[string]string{"cpu": "0.5", "memory": "1Gi"},
			}
		}, nil},
		{"empty resources", func(e *falconv1.Experiment) { e.RoleToTaskSpec["main"].Resources = &falconv1.Resources{} }, nil},
		{"accelerators cannot be requested through resources", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"].Resources = &falconv1.Resources{Limits: map[string]string{"google.com/tpu": "4"}}
		}, []string{"role_to_task_spec.main.resources.limits.google.com/tpu"}},
		{"unknown resource name", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"].Resources = &falconv1.Resources{Requests: map[string]string{"cpus": "2"}}
		}, []string{"role_to_task_spec.main.resources.requests.cpus"}},
		{"not a quantity", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"].Resources = &falconv1.Resources{Requests: map[string]string{"memory": "4GB"}}
		}, []string{"role_to_task_spec.main.resources.requests.memory"}},
		{"zero and negative quantities", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"].Resources = &falconv1.Resources{
				Requests: map[string]string{"cpu": "0"},
				Limits:   map[string]string{"memory": "-1Gi"},
			}
		}, []string{"role_to_task_spec.main.resources.requests.cpu", "role_to_task_spec.main.resources.limits.memory"}},
		{"limit below its request", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"].Resources = &falconv1.Resources{
				Requests: map[string]string{"cpu": "2", "memory": "8Gi"},
				Limits:   map[string]string{"cpu": "2", "memory": "4Gi"},
			}
		}, []string{"role_to_task_spec.main.resources.limits.memory"}},
		{"a bad request is not also compared with its limit", func(e *falconv1.Experiment) {
			e.RoleToTaskSpec["main"].Resources = &falconv1.Resources{
				Requests: map[string]string{"memory": "lots"},
				Limits:   map[string]string{"memory": "4Gi"},
			}
		}, []string{"role_to_task_spec.main.resources.requests.memory"}},
		{"several problems at once", func(e *falconv1.Experiment) {
			e.Name = ""
			e.RoleToTaskSpec["main"].Replica = 0
			e.RoleToTaskSpec["main"].Command = ""
			e.RoleToTaskSpec["main"].Resources = &falconv1.Resources{
				Requests: map[string]string{"cpu": "4", "gpu": "1"},
				Limits:   map[string]string{"cpu": "2"},
			}
		}, []string{"name", "role_to_task_spec.main.command", "role_to_task_spec.main.replica",
			"role_to_task_spec.main.resources.requests.gpu", "role_to_task_spec.main.resources.limits.cpu"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := proto.Clone(valid()).(*falconv1.Experiment)
			tt.mutate(e)
			err := Experiment(e, known, []string{"local"})
			if len(tt.fields) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("want an InvalidArgument error, got %v", err)
			}
			var fe errdefs.FieldErrors
			if !errors.As(err, &fe) {
				t.Fatalf("want FieldErrors, got %T", err)
			}
			var got []string
			for _, f := range fe {
				got = append(got, f.Field)
			}
			if strings.Join(got, ",") != strings.Join(tt.fields, ",") {
				t.Fatalf("fields = %v, want %v (error: %v)", got, tt.fields, err)
			}
		})
	}
}

// TestMissingReplica: a task without replica is told what to set; a TPU
// slice's topology fixes it, so the message says the number, alongside the
// other errors of the manifest.
func TestMissingReplica(t *testing.T) {
	tests := []struct {
		name string
		task *falconv1.TaskSpec
		want string
	}{
		{"v7x one host", &falconv1.TaskSpec{Command: "x", DeviceType: "v7x", DeviceTopo: "2x2x1"},
			"role_to_task_spec.main.replica: is required: topology 2x2x1 is 4 chips = 1 host of 4 chips; set replica: 1"},
		{"v7x four hosts, with another error", &falconv1.TaskSpec{DeviceType: "v7x", DeviceTopo: "2x2x4"},
			"role_to_task_spec.main.replica: is required: topology 2x2x4 is 16 chips = 4 hosts of 4 chips; set replica: 4"},
		{"a topology that does not resolve", &falconv1.TaskSpec{Command: "x", DeviceType: "v6e", DeviceTopo: "2x3"},
			"role_to_task_spec.main.replica: is required: the number of hosts in the slice, 1 to 1024"},
		{"cpu", &falconv1.TaskSpec{Command: "x", DeviceType: "cpu"},
			"role_to_task_spec.main.replica: is required: the number of hosts in the slice, 1 to 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &falconv1.Experiment{Name: "run-1", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": tt.task}}
			err := Experiment(e, func(string) bool { return true }, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to hold %q", err, tt.want)
			}
		})
	}
}

func TestParseResourcesMessages(t *testing.T) {
	tests := []struct {
		name string
		in   *falconv1.Resources
		want string // the whole error
	}{
		{"unknown name lists the allowed ones",
			&falconv1.Resources{Requests: map[string]string{"nvidia.com/gpu": "1"}},
			`resources.requests.nvidia.com/gpu: unknown resource "nvidia.com/gpu"; allowed: cpu, memory, ephemeral-storage (accelerators come from device_type and device_count)`},
		{"not a quantity gives an example",
			&falconv1.Resources{Limits: map[string]string{"cpu": "two"}},
			`resources.limits.cpu: "two" is not a Kubernetes quantity (e.g. 2 or 500m)`},
		{"not positive",
			&falconv1.Resources{Requests: map[string]string{"ephemeral-storage": "0"}},
			`resources.requests.ephemeral-storage: must be positive, got 0`},
		{"limit below request quotes both as written",
			&falconv1.Resources{Requests: map[string]string{"memory": "8Gi"}, Limits: map[string]string{"memory": "4096Mi"}},
			`resources.limits.memory: 4096Mi is less than the request 8Gi; a limit must be at least its request`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ParseResources("resources", tt.in)
			if err == nil {
				t.Fatal("ParseResources succeeded, want an error")
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("error %v is not errdefs.ErrInvalid", err)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestParseResources(t *testing.T) {
	req, lim, err := ParseResources("resources", &falconv1.Resources{
		Requests: map[string]string{"cpu": "1.5", "memory": "4Gi"},
		Limits:   map[string]string{"memory": "8Gi"},
	})
	if err != nil {
		t.Fatalf("ParseResources: %v", err)
	}
	got := map[string]string{}
	for k, q := range req {
		got["requests."+k] = q.String()
	}
	for k, q := range lim {
		got["limits."+k] = q.String()
	}
	want := map[string]string{"requests.cpu": "1500m", "requests.memory": "4Gi", "limits.memory": "8Gi"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
	if req, lim, err := ParseResources("resources", nil); err != nil || req != nil || lim != nil {
		t.Errorf("ParseResources(nil) = %v, %v, %v; want nothing", req, lim, err)
	}
}
