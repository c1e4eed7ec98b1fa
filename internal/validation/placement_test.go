package validation

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/placement"
)

func TestPlacement(t *testing.T) {
	clusters := []*falconv1.Cluster{
		{Name: "local", Backend: "local", Status: "active"},
		{Name: "tpu-east", Backend: "gke", Status: "active", AcceleratorTypes: []string{"v7x"}},
		{Name: "gpu-lab", Backend: "kubernetes", Status: "maintenance", AcceleratorTypes: []string{"nvidia-h100-80gb", "cpu"}},
		{Name: "xpk-west", Backend: "xpk", Status: "active", AcceleratorTypes: []string{"v5p"}},
	}
	v7x := func() *falconv1.TaskSpec {
		return &falconv1.TaskSpec{Command: "python train.py", Image: "python:3.12", Replica: 2, DeviceType: "v7x", DeviceTopo: "2x2x2"}
	}
	big := strings.Repeat("x", 100<<10)
	envs := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m["E"+string(rune('A'+i))] = big
		}
		return m
	}
	tests := []struct {
		name   string
		pin    string
		config string
		task   func(*falconv1.TaskSpec)
		want   map[string][]string // field -> substrings of its detail; nil: valid
	}{
		{name: "an image on the TPU cluster", task: func(*falconv1.TaskSpec) {}},
		{name: "no image where only containers run it", task: func(t *falconv1.TaskSpec) { t.Image = "  " },
			want: map[string][]string{"role_to_task_spec.main.image": {"is required", "on the clusters that could take it (tpu-east)", "backend gke", "local backend"}}},
		{name: "no image, pinned to the GPU cluster in maintenance", pin: "gpu-lab",
			task: func(t *falconv1.TaskSpec) { t.Image, t.DeviceType, t.DeviceTopo, t.Replica = "", "h100", "", 1 },
			want: map[string][]string{"role_to_task_spec.main.image": {"is required", "on its cluster_name gpu-lab", "backend kubernetes"}}},
		{name: "no image for a type nobody offers: the local fallback runs it",
			task: func(t *falconv1.TaskSpec) { t.Image, t.DeviceType, t.DeviceTopo, t.Replica = "", "v6e", "2x2", 1 }},
		{name: "no image for cpu, which only the GPU cluster offers", task: func(t *falconv1.TaskSpec) { t.Image, t.DeviceType, t.DeviceTopo, t.Replica = "", "", "", 1 },
			want: map[string][]string{"role_to_task_spec.main.image": {"gpu-lab"}}},
		{name: "pinned to a cluster that does not offer the type", pin: "gpu-lab",
			want: map[string][]string{"role_to_task_spec.main.device_type": {"v7x cannot run on cluster_name gpu-lab", "it offers nvidia-h100-80gb, cpu", "pin one that offers v7x (tpu-east)", "leave cluster_name empty"}}},
		{name: "pinned to the fallback for a type another cluster offers", pin: "local",
			want: map[string][]string{"role_to_task_spec.main.device_type": {"cannot run on cluster_name local", "takes only the types no other registered cluster offers", "(tpu-east)"}}},
		{name: "pinned to the fallback, no device type, cpu offered elsewhere", pin: "local",
			task: func(t *falconv1.TaskSpec) { t.DeviceType, t.DeviceTopo, t.Replica = "", "", 1 },
			want: map[string][]string{"role_to_task_spec.main.device_type": {"cpu (no device_type) cannot run on cluster_name local", "(gpu-lab)"}}},
		{name: "a Job larger than etcd stores", task: func(t *falconv1.TaskSpec) { t.Command, t.Envs = big, envs(16) },
			want: map[string][]string{"role_to_task_spec.main.command": {"is 102400 bytes", "the gke backend (tpu-east) needs at least 1740832 bytes", "over its limit of 1572864"}}},
		{name: "an exec larger than ARG_MAX on the fallback", config: big,
			task: func(t *falconv1.TaskSpec) {
				t.Command, t.Envs, t.DeviceType, t.DeviceTopo, t.Replica = big, envs(19), "v6e", "2x2", 1
			},
			want: map[string][]string{"role_to_task_spec.main.command": {"the local backend (local) needs at least", "over its limit of 2097152", "ARG_MAX"}}},
		{name: "two slices on the gke cluster", task: func(t *falconv1.TaskSpec) { t.Slices = 2 }},
		{name: "two slices on the xpk cluster", task: func(t *falconv1.TaskSpec) { t.Slices, t.DeviceType = 2, "v5p" }},
		{name: "two slices pinned to the local machine", pin: "local", task: func(t *falconv1.TaskSpec) { t.Slices, t.DeviceType, t.DeviceTopo = 2, "v6e", "2x4" }},
		{name: "under every limit", config: big, task: func(t *falconv1.TaskSpec) { t.Command, t.Envs = big, map[string]string{"A": big} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := v7x()
			if tt.task != nil {
				tt.task(task)
			}
			e := &falconv1.Experiment{Name: "e", ClusterName: tt.pin, Config: tt.config, RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": task}}
			if err := Experiment(e, nil, nil); err != nil {
				t.Fatalf("the case is not a well-formed request: %v", err)
			}
			err := Placement(e, clusters)
			var fes errdefs.FieldErrors
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Placement: %v, want nil", err)
				}
				return
			}
			if !errors.As(err, &fes) || !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("Placement: %v, want field errors", err)
			}
			got := map[string]string{}
			for _, fe := range fes {
				got[fe.Field] = fe.Detail
			}
			var fields, wantFields []string
			for f := range got {
				fields = append(fields, f)
			}
			for f, subs := range tt.want {
				wantFields = append(wantFields, f)
				for _, s := range subs {
					if !strings.Contains(got[f], s) {
						t.Errorf("%s: %q lacks %q", f, got[f], s)
					}
				}
			}
			if diff := cmp.Diff(wantFields, fields); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCommandLimitIsOneArgument(t *testing.T) {
	e := valid()
	e.RoleToTaskSpec["main"].Command = strings.Repeat("x", placement.MaxArgStrlen-1)
	if err := Experiment(e, nil, nil); err != nil {
		t.Fatalf("a command of MAX_ARG_STRLEN-1 bytes: %v, want valid", err)
	}
	e.RoleToTaskSpec["main"].Command += "x"
	err := Experiment(e, nil, nil)
	want := "role_to_task_spec.main.command: is 131072 bytes, the limit is 131071: every backend runs it as one argument of /bin/sh -c, and Linux limits one argument to 131072 bytes with its terminating NUL (MAX_ARG_STRLEN)"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a command of MAX_ARG_STRLEN bytes:\n got %v\nwant %s...", err, want)
	}
}
