package fakegke_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	container "google.golang.org/api/container/v1"
	"google.golang.org/api/googleapi"

	"github.com/falconhq/falcon/internal/testenv/fakegke"
)

func TestGPUPoolValidation(t *testing.T) {
	latest := &container.GPUDriverInstallationConfig{GpuDriverVersion: "LATEST"}
	tests := []struct {
		name        string
		machineType string
		accels      []*container.AcceleratorConfig
		want        []*container.AcceleratorConfig // on the pool GKE returns
		wantRefusal string                         // part of GKE's INVALID_ARGUMENT message; "" accepts
	}{
		{
			name: "a3 with its own accelerator restated", machineType: "a3-highgpu-8g",
			accels: []*container.AcceleratorConfig{{AcceleratorType: "nvidia-h100-80gb", AcceleratorCount: 8, GpuDriverInstallationConfig: latest}},
			want:   []*container.AcceleratorConfig{{AcceleratorType: "nvidia-h100-80gb", AcceleratorCount: 8, GpuDriverInstallationConfig: latest}},
		},
		{
			name: "a3 without accelerators gets the implied ones", machineType: "a3-highgpu-4g",
			want: []*container.AcceleratorConfig{{AcceleratorType: "nvidia-h100-80gb", AcceleratorCount: 4}},
		},
		{
			name: "a2 ultra implies the 80GB A100", machineType: "a2-ultragpu-2g",
			want: []*container.AcceleratorConfig{{AcceleratorType: "nvidia-a100-80gb", AcceleratorCount: 2}},
		},
		{
			name: "g2 counts L4s by size, not by name", machineType: "g2-standard-24",
			accels: []*container.AcceleratorConfig{{AcceleratorType: "nvidia-l4", AcceleratorCount: 2}},
			want:   []*container.AcceleratorConfig{{AcceleratorType: "nvidia-l4", AcceleratorCount: 2}},
		},
		{
			name: "n1 takes attached T4s", machineType: "n1-standard-8",
			accels: []*container.AcceleratorConfig{{AcceleratorType: "nvidia-tesla-t4", AcceleratorCount: 2}},
			want:   []*container.AcceleratorConfig{{AcceleratorType: "nvidia-tesla-t4", AcceleratorCount: 2}},
		},
		{
			name: "CPU machine without accelerators stays so", machineType: "e2-standard-4",
		},
		{
			name: "type that does not match the machine", machineType: "a3-highgpu-8g",
			accels:      []*container.AcceleratorConfig{{AcceleratorType: "nvidia-l4", AcceleratorCount: 8}},
			wantRefusal: `Accelerator type "nvidia-l4" is not supported with machine type "a3-highgpu-8g": the machine type comes with 8 nvidia-h100-80gb`,
		},
		{
			name: "count that does not match the machine", machineType: "g2-standard-48",
			accels:      []*container.AcceleratorConfig{{AcceleratorType: "nvidia-l4", AcceleratorCount: 8}},
			wantRefusal: `acceleratorCount': 8. Machine type "g2-standard-48" comes with 4 nvidia-l4`,
		},
		{
			name: "accelerator on a machine that takes none", machineType: "e2-standard-4",
			accels:      []*container.AcceleratorConfig{{AcceleratorType: "nvidia-tesla-t4", AcceleratorCount: 1}},
			wantRefusal: `Machine type "e2-standard-4" does not support accelerators`,
		},
		{
			name: "n1 with a GPU it cannot attach", machineType: "n1-standard-8",
			accels:      []*container.AcceleratorConfig{{AcceleratorType: "nvidia-h100-80gb", AcceleratorCount: 1}},
			wantRefusal: `Accelerator type "nvidia-h100-80gb" is not supported with machine type "n1-standard-8"`,
		},
		{
			name: "missing type", machineType: "a3-highgpu-8g",
			accels:      []*container.AcceleratorConfig{{AcceleratorCount: 8}},
			wantRefusal: "Accelerator type must be specified",
		},
		{
			name: "zero count", machineType: "a3-highgpu-8g",
			accels:      []*container.AcceleratorConfig{{AcceleratorType: "nvidia-h100-80gb"}},
			wantRefusal: "Accelerator count must be at least 1",
		},
		{
			name: "unknown driver version", machineType: "a3-highgpu-8g",
			accels: []*container.AcceleratorConfig{{AcceleratorType: "nvidia-h100-80gb", AcceleratorCount: 8,
				GpuDriverInstallationConfig: &container.GPUDriverInstallationConfig{GpuDriverVersion: "NEWEST"}}},
			wantRefusal: `gpuDriverVersion': "NEWEST"`,
		},
		{
			name: "two accelerator types", machineType: "n1-standard-8",
			accels: []*container.AcceleratorConfig{
				{AcceleratorType: "nvidia-tesla-t4", AcceleratorCount: 1},
				{AcceleratorType: "nvidia-tesla-p4", AcceleratorCount: 1},
			},
			wantRefusal: "at most one accelerator type",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, csvc, _ := newServer(t)
			np := &container.NodePool{Name: "gpu", InitialNodeCount: 1, Config: &container.NodeConfig{MachineType: tt.machineType, Accelerators: tt.accels}}
			_, err := csvc.Projects.Locations.Clusters.NodePools.Create(clusterPath, &container.CreateNodePoolRequest{NodePool: np}).Do()
			if tt.wantRefusal != "" {
				var ge *googleapi.Error
				if !errors.As(err, &ge) || ge.Code != 400 || !strings.Contains(ge.Body, "INVALID_ARGUMENT") || !strings.Contains(ge.Message, tt.wantRefusal) {
					t.Fatalf("create = %v, want 400 INVALID_ARGUMENT containing %q", err, tt.wantRefusal)
				}
				if _, ok := s.Pool("gpu"); ok {
					t.Error("a refused pool exists")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := csvc.Projects.Locations.Clusters.NodePools.Get(clusterPath + "/nodePools/gpu").Do()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Config.Accelerators); diff != "" {
				t.Errorf("accelerators of the pool returned (-want +got):\n%s", diff)
			}
		})
	}
}

func TestImpliedGPU(t *testing.T) {
	tests := []struct {
		machineType string
		wantType    string
		wantCount   int64
		wantOK      bool
	}{
		{"a3-highgpu-8g", "nvidia-h100-80gb", 8, true},
		{"a3-megagpu-8g", "nvidia-h100-mega-80gb", 8, true},
		{"a3-ultragpu-8g", "nvidia-h200-141gb", 8, true},
		{"a4-highgpu-8g", "nvidia-b200", 8, true},
		{"a2-highgpu-1g", "nvidia-tesla-a100", 1, true},
		{"a2-megagpu-16g", "nvidia-tesla-a100", 16, true},
		{"g2-standard-4", "nvidia-l4", 1, true},
		{"g2-standard-96", "nvidia-l4", 8, true},
		{"n1-standard-8", "", 0, false},
		{"ct5p-hightpu-4t", "", 0, false},
		{"a3-highgpu-0g", "", 0, false},
	}
	for _, tt := range tests {
		typ, n, ok := fakegke.ImpliedGPU(tt.machineType)
		if typ != tt.wantType || n != tt.wantCount || ok != tt.wantOK {
			t.Errorf("ImpliedGPU(%q) = %q, %d, %v; want %q, %d, %v", tt.machineType, typ, n, ok, tt.wantType, tt.wantCount, tt.wantOK)
		}
	}
}
