package gkeenv

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	container "google.golang.org/api/container/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/falconhq/falcon/internal/provider/gke"
)

func TestLabelTopologyIsGKEs(t *testing.T) {
	if labelTopology != gke.LabelTopology {
		t.Errorf("labelTopology = %q, gke.LabelTopology = %q", labelTopology, gke.LabelTopology)
	}
}

func TestShapeOf(t *testing.T) {
	tpuTaint := corev1.Taint{Key: "google.com/tpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name    string
		np      container.NodePool
		want    shape
		wantErr string
	}{
		{
			name: "v5p multi-host pool as Falcon builds it",
			np: container.NodePool{
				Name: "falcon-a",
				Config: &container.NodeConfig{
					MachineType: "ct5p-hightpu-4t",
					Labels:      map[string]string{"falcon.dev/accelerator": "v5p", labelTopology: "2x2x2"},
					Taints:      []*container.NodeTaint{{Key: "google.com/tpu", Value: "present", Effect: "NO_SCHEDULE"}},
				},
				PlacementPolicy: &container.PlacementPolicy{Type: "COMPACT", TpuTopology: "2x2x2"},
			},
			want: shape{
				labels: map[string]string{
					"falcon.dev/accelerator":               "v5p",
					labelTopology:                          "2x2x2",
					"cloud.google.com/gke-nodepool":        "falcon-a",
					"node.kubernetes.io/instance-type":     "ct5p-hightpu-4t",
					"cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
					"cloud.google.com/gke-tpu-topology":    "2x2x2",
				},
				taints:   []corev1.Taint{tpuTaint},
				capacity: corev1.ResourceList{"google.com/tpu": resource.MustParse("4")},
			},
		},
		{
			name: "placement policy topology wins over the label",
			np: container.NodePool{
				Name:            "p",
				Config:          &container.NodeConfig{MachineType: "ct5p-hightpu-4t", Labels: map[string]string{labelTopology: "2x2x1"}},
				PlacementPolicy: &container.PlacementPolicy{TpuTopology: "2x2x4"},
			},
			want: shape{
				labels: map[string]string{
					labelTopology:                          "2x2x1",
					"cloud.google.com/gke-nodepool":        "p",
					"node.kubernetes.io/instance-type":     "ct5p-hightpu-4t",
					"cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
					"cloud.google.com/gke-tpu-topology":    "2x2x4",
				},
				taints:   []corev1.Taint{tpuTaint},
				capacity: corev1.ResourceList{"google.com/tpu": resource.MustParse("4")},
			},
		},
		{
			name: "v7x with a workload policy takes the label's topology and GKE's taint",
			np: container.NodePool{
				Name:            "p",
				Config:          &container.NodeConfig{MachineType: "tpu7x-standard-4t", Labels: map[string]string{labelTopology: "2x2x2"}},
				PlacementPolicy: &container.PlacementPolicy{Type: "COMPACT", PolicyName: "falcon-v7x-2x2x2"},
			},
			want: shape{
				labels: map[string]string{
					labelTopology:                          "2x2x2",
					"cloud.google.com/gke-nodepool":        "p",
					"node.kubernetes.io/instance-type":     "tpu7x-standard-4t",
					"cloud.google.com/gke-tpu-accelerator": "tpu7x",
					"cloud.google.com/gke-tpu-topology":    "2x2x2",
				},
				taints:   []corev1.Taint{tpuTaint},
				capacity: corev1.ResourceList{"google.com/tpu": resource.MustParse("4")},
			},
		},
		{
			name: "GPU pool without acceleratorConfig takes its machine type's",
			np:   container.NodePool{Name: "g", Config: &container.NodeConfig{MachineType: "a3-highgpu-8g"}},
			want: shape{
				labels: map[string]string{
					"cloud.google.com/gke-nodepool":    "g",
					"node.kubernetes.io/instance-type": "a3-highgpu-8g",
					"cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
				},
				taints:   []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}},
				capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			},
		},
		{
			name: "H100 pool as Falcon builds it",
			np: container.NodePool{Name: "falcon-g", Config: &container.NodeConfig{
				MachineType: "a3-highgpu-8g",
				Labels:      map[string]string{"falcon.dev/accelerator": "nvidia-h100-80gb", labelTopology: "1x8gpu"},
				Taints:      []*container.NodeTaint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NO_SCHEDULE"}},
				Accelerators: []*container.AcceleratorConfig{{AcceleratorType: "nvidia-h100-80gb", AcceleratorCount: 8,
					GpuDriverInstallationConfig: &container.GPUDriverInstallationConfig{GpuDriverVersion: "LATEST"}}},
			}},
			want: shape{
				labels: map[string]string{
					"falcon.dev/accelerator":                  "nvidia-h100-80gb",
					labelTopology:                             "1x8gpu",
					"cloud.google.com/gke-nodepool":           "falcon-g",
					"node.kubernetes.io/instance-type":        "a3-highgpu-8g",
					"cloud.google.com/gke-accelerator":        "nvidia-h100-80gb",
					"cloud.google.com/gke-gpu-driver-version": "latest",
				},
				taints:   []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}},
				capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			},
		},
		{
			name: "L4 count comes from the acceleratorConfig, not the machine name",
			np: container.NodePool{Name: "l", Config: &container.NodeConfig{
				MachineType:  "g2-standard-24",
				Accelerators: []*container.AcceleratorConfig{{AcceleratorType: "nvidia-l4", AcceleratorCount: 2}},
			}},
			want: shape{
				labels: map[string]string{
					"cloud.google.com/gke-nodepool":    "l",
					"node.kubernetes.io/instance-type": "g2-standard-24",
					"cloud.google.com/gke-accelerator": "nvidia-l4",
				},
				taints:   []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}},
				capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")},
			},
		},
		{
			name: "N1 with attached T4s and the default driver",
			np: container.NodePool{Name: "t", Config: &container.NodeConfig{
				MachineType: "n1-standard-8",
				Accelerators: []*container.AcceleratorConfig{{AcceleratorType: "nvidia-tesla-t4", AcceleratorCount: 4,
					GpuDriverInstallationConfig: &container.GPUDriverInstallationConfig{GpuDriverVersion: "DEFAULT"}}},
			}},
			want: shape{
				labels: map[string]string{
					"cloud.google.com/gke-nodepool":           "t",
					"node.kubernetes.io/instance-type":        "n1-standard-8",
					"cloud.google.com/gke-accelerator":        "nvidia-tesla-t4",
					"cloud.google.com/gke-gpu-driver-version": "default",
				},
				taints:   []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}},
				capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")},
			},
		},
		{
			name: "CPU pool keeps its own taints only",
			np: container.NodePool{Name: "c", Config: &container.NodeConfig{
				MachineType: "e2-standard-8",
				Taints: []*container.NodeTaint{
					{Key: "a", Value: "1", Effect: "PREFER_NO_SCHEDULE"},
					{Key: "b", Value: "2", Effect: "NO_EXECUTE"},
				},
			}},
			want: shape{
				labels: map[string]string{
					"cloud.google.com/gke-nodepool":    "c",
					"node.kubernetes.io/instance-type": "e2-standard-8",
				},
				taints: []corev1.Taint{
					{Key: "a", Value: "1", Effect: corev1.TaintEffectPreferNoSchedule},
					{Key: "b", Value: "2", Effect: corev1.TaintEffectNoExecute},
				},
				capacity: corev1.ResourceList{},
			},
		},
		{
			name: "no config",
			np:   container.NodePool{Name: "n"},
			want: shape{labels: map[string]string{"cloud.google.com/gke-nodepool": "n"}, capacity: corev1.ResourceList{}},
		},
		{
			name: "unknown taint effect",
			np: container.NodePool{Name: "p", Config: &container.NodeConfig{
				Taints: []*container.NodeTaint{{Key: "k", Effect: "EFFECT_UNSPECIFIED"}},
			}},
			wantErr: `taint k has unknown effect "EFFECT_UNSPECIFIED"`,
		},
		{
			name:    "TPU without topology",
			np:      container.NodePool{Name: "p", Config: &container.NodeConfig{MachineType: "ct5p-hightpu-4t"}},
			wantErr: "no topology",
		},
	}
	opts := cmp.Options{
		cmp.AllowUnexported(shape{}),
		cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := shapeOf(&tt.np)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("shapeOf() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, opts); diff != "" {
				t.Errorf("shapeOf() (-want +got):\n%s", diff)
			}
		})
	}
}
