package gkeenv

import (
	"fmt"
	"maps"

	container "google.golang.org/api/container/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/falconhq/falcon/internal/accelerator"
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
// nodes of np. Like GKE it reads the accelerator from the machine type, not
// from Falcon's falcon.dev/accelerator label, so a pool built with the wrong
// machine type gets nodes a job's selector does not match. A machine type
// that is no known TPU or GPU makes plain CPU nodes.
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

	spec, chips, ok := machineType(cfg.MachineType)
	if !ok {
		return s, nil
	}
	var res corev1.ResourceName
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
	case accelerator.KindGPU:
		s.labels[accelerator.LabelGPUAccelerator] = spec.NodeLabel
		res = accelerator.ResourceGPU
	default:
		return s, nil
	}
	s.capacity[res] = *resource.NewQuantity(int64(chips), resource.DecimalSI)
	// GKE taints accelerator nodes itself, whether or not the pool asks.
	auto := corev1.Taint{Key: string(res), Value: "present", Effect: corev1.TaintEffectNoSchedule}
	for _, t := range s.taints {
		if t.Key == auto.Key && t.Effect == auto.Effect {
			return s, nil
		}
	}
	s.taints = append(s.taints, auto)
	return s, nil
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
