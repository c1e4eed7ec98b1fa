package gkeenv

import (
	"fmt"
	"maps"
	"strings"

	container "google.golang.org/api/container/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/testenv/fakegke"
)

// labelTopology is gke.LabelTopology, Falcon's record of a pool's slice
// topology. It is repeated rather than imported so that package gke's own
// tests may use this package; a test keeps the two equal.
const labelTopology = "falcon.dev/topology"

// taintEffects maps the node pool API's taint effects to Kubernetes'.
var taintEffects = map[string]corev1.TaintEffect{
	"NO_SCHEDULE":        corev1.TaintEffectNoSchedule,
	"PREFER_NO_SCHEDULE": corev1.TaintEffectPreferNoSchedule,
	"NO_EXECUTE":         corev1.TaintEffectNoExecute,
}

// shape is what every node of a pool is given.
type shape struct {
	labels   map[string]string
	taints   []corev1.Taint
	capacity corev1.ResourceList
}

// shapeOf returns the labels, taints and accelerator capacity GKE gives the
// nodes of np. Like GKE it reads the accelerator from the pool's
// acceleratorConfig or its machine type, never from Falcon's
// falcon.dev/accelerator label, so a pool built with the wrong machine type
// gets nodes a job's selector does not match. A machine type that is no
// known TPU or GPU makes plain CPU nodes.
func shapeOf(np *container.NodePool) (shape, error) {
	cfg := np.Config
	if cfg == nil {
		cfg = &container.NodeConfig{}
	}
	s := shape{labels: maps.Clone(cfg.Labels), capacity: corev1.ResourceList{}}
	if s.labels == nil {
		s.labels = map[string]string{}
	}
	s.labels[accelerator.LabelNodePool] = np.Name
	if cfg.MachineType != "" {
		s.labels[corev1.LabelInstanceTypeStable] = cfg.MachineType
	}
	for _, t := range cfg.Taints {
		effect, ok := taintEffects[t.Effect]
		if !ok {
			return shape{}, fmt.Errorf("pool %s: taint %s has unknown effect %q", np.Name, t.Key, t.Effect)
		}
		s.taints = append(s.taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: effect})
	}

	var res corev1.ResourceName
	if typ, n, driver, ok := gpuOf(cfg); ok {
		s.labels[accelerator.LabelGPUAccelerator] = typ
		if driver != "" {
			s.labels[labelGPUDriverVersion] = driver
		}
		s.capacity[accelerator.ResourceGPU] = *resource.NewQuantity(n, resource.DecimalSI)
		return withAutoTaint(s, accelerator.ResourceGPU), nil
	}
	spec, chips, ok := machineType(cfg.MachineType)
	if !ok {
		return s, nil
	}
	switch spec.Kind {
	case accelerator.KindTPU:
		// GKE takes a multi-host slice's topology from the placement
		// policy, or from a v7x pool's workload policy, which the fake
		// cannot read; Falcon's label covers that and single hosts.
		topology := cfg.Labels[labelTopology]
		if pp := np.PlacementPolicy; pp != nil && pp.TpuTopology != "" {
			topology = pp.TpuTopology
		}
		if topology == "" {
			return shape{}, fmt.Errorf("pool %s: TPU machine type %s but no topology: neither placementPolicy.tpuTopology nor label %s", np.Name, cfg.MachineType, labelTopology)
		}
		s.labels[accelerator.LabelTPUAccelerator] = spec.NodeLabel
		s.labels[accelerator.LabelTPUTopology] = topology
		res = accelerator.ResourceTPU
	default:
		return s, nil
	}
	s.capacity[res] = *resource.NewQuantity(int64(chips), resource.DecimalSI)
	return withAutoTaint(s, res), nil
}

// withAutoTaint adds the taint GKE puts on accelerator nodes itself,
// whether or not the pool asks for it.
func withAutoTaint(s shape, res corev1.ResourceName) shape {
	auto := corev1.Taint{Key: string(res), Value: "present", Effect: corev1.TaintEffectNoSchedule}
	for _, t := range s.taints {
		if t.Key == auto.Key && t.Effect == auto.Effect {
			return s
		}
	}
	s.taints = append(s.taints, auto)
	return s
}

// labelGPUDriverVersion is the label GKE puts on GPU nodes whose pool asks
// it to install the NVIDIA driver (default or latest), and which GPU pods
// may select.
const labelGPUDriverVersion = "cloud.google.com/gke-gpu-driver-version"

// gpuOf is a pool's GPU as GKE sees it: its acceleratorConfig (which
// fakegke fills in for machine types that imply one, as GKE does), else
// the GPU its machine type comes with; and the driver version label's
// value, empty when the pool installs none.
func gpuOf(cfg *container.NodeConfig) (typ string, count int64, driver string, ok bool) {
	if len(cfg.Accelerators) > 0 && cfg.Accelerators[0] != nil {
		a := cfg.Accelerators[0]
		if d := a.GpuDriverInstallationConfig; d != nil && (d.GpuDriverVersion == "DEFAULT" || d.GpuDriverVersion == "LATEST") {
			driver = strings.ToLower(d.GpuDriverVersion)
		}
		return a.AcceleratorType, a.AcceleratorCount, driver, true
	}
	typ, count, ok = fakegke.ImpliedGPU(cfg.MachineType)
	return typ, count, "", ok
}

// machineType finds the device type whose machine type name is.
func machineType(name string) (accelerator.Spec, int, bool) {
	for _, spec := range accelerator.Specs() {
		for _, m := range spec.MachineTypes {
			if m.Name == name {
				return spec, m.Chips, true
			}
		}
	}
	return accelerator.Spec{}, 0, false
}
