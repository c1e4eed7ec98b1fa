package xpk

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/falconhq/falcon/internal/accelerator"
)

// Priorities are xpk's --priority choices.
var Priorities = []string{"very-low", "low", "medium", "high", "very-high"}

// workloadName is xpk's workload_name_type: at most 40 characters.
var workloadName = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// MaxWorkloadName is the longest name xpk's parser accepts.
const MaxWorkloadName = 40

// CreateArgs builds `xpk workload create` for spec on c, in 001 section 4's
// order: cluster, project, zone, workload, image, command, the accelerator
// (--tpu-type for a TPU, --device-type for a GPU), priority, namespace
// (the spec's, else the cluster's; left out when neither has one), each
// env in key order, --num-slices and --num-nodes when above 1, then the
// extra args verbatim.
func CreateArgs(c Cluster, s WorkloadSpec) ([]string, error) {
	if err := checkName(s.Name); err != nil {
		return nil, err
	}
	var accel string
	switch s.DeviceClass {
	case ClassTPU:
		accel = "--tpu-type=" + s.AcceleratorType
	case ClassGPU:
		accel = "--device-type=" + s.AcceleratorType
	default:
		return nil, fmt.Errorf("device class %q: must be %s or %s", s.DeviceClass, ClassTPU, ClassGPU)
	}
	if s.AcceleratorType == "" {
		return nil, fmt.Errorf("workload %s names no accelerator type", s.Name)
	}
	prio := s.Priority
	if prio == "" {
		prio = "medium"
	}
	if !slices.Contains(Priorities, prio) {
		return nil, fmt.Errorf("priority %q: xpk takes one of %s", prio, strings.Join(Priorities, ", "))
	}
	args := append(locate("create", c),
		"--workload="+s.Name,
		"--docker-image="+s.DockerImage,
		"--command="+strings.Join(s.Command, " "),
		accel,
		"--priority="+prio,
	)
	if ns := cmpOr(s.Namespace, c.DefaultNamespace); ns != "" {
		args = append(args, "--namespace="+ns)
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "--env="+k+"="+s.Env[k])
	}
	if s.NumSlices > 1 {
		args = append(args, "--num-slices="+strconv.Itoa(s.NumSlices))
	}
	if s.NumNodes > 1 {
		args = append(args, "--num-nodes="+strconv.Itoa(s.NumNodes))
	}
	return append(args, s.ExtraArgs...), nil
}

// ListArgs builds `xpk workload list`, as 001's ClusterProber runs it;
// job, when set, narrows it with --filter-by-job.
func ListArgs(c Cluster, job string) []string {
	args := locate("list", c)
	if job != "" {
		args = append(args, "--filter-by-job="+job)
	}
	return args
}

// DeleteArgs builds `xpk workload delete` of one workload.
func DeleteArgs(c Cluster, name string) []string {
	return append(locate("delete", c), "--workload="+name)
}

func locate(verb string, c Cluster) []string {
	return []string{"workload", verb, "--cluster=" + c.ClusterID, "--project=" + c.Project, "--zone=" + c.Zone}
}

func checkName(n string) error {
	if len(n) > MaxWorkloadName || !workloadName.MatchString(n) {
		return fmt.Errorf("workload name %q: xpk takes at most %d characters matching %s", n, MaxWorkloadName, workloadName)
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// xpkTPU maps a TPU's GKE accelerator label to the prefix of xpk's type
// names (system_characteristics.py), which xpk spells with the topology
// (v5p-2x2x4) as well as with the TensorCore count.
var xpkTPU = map[string]string{
	"tpu7x":                "tpu7x",
	"tpu-v6e-slice":        "v6e",
	"tpu-v5p-slice":        "v5p",
	"tpu-v5-lite-podslice": "v5litepod",
	"tpu-v4-podslice":      "v4",
}

// xpkGPU maps a GPU's GKE accelerator label to xpk's device type prefix,
// which xpk completes with the GPU count per VM (h100-80gb-8).
var xpkGPU = map[string]string{
	"nvidia-l4":             "l4",
	"nvidia-tesla-a100":     "a100-40gb",
	"nvidia-h100-80gb":      "h100-80gb",
	"nvidia-h100-mega-80gb": "h100-mega-80gb",
	"nvidia-h200-141gb":     "h200-141gb",
	"nvidia-b200":           "b200",
}

// TypeFor returns xpk's name for a Falcon slice and its device class:
// <prefix>-<topology> for a TPU, <prefix>-<GPUs per VM> for a GPU.
func TypeFor(sl accelerator.Slice) (name, class string, err error) {
	switch sl.Spec.Kind {
	case accelerator.KindTPU:
		p, ok := xpkTPU[sl.Spec.NodeLabel]
		if !ok {
			return "", "", fmt.Errorf("xpk has no TPU type for %s", sl.Spec.Name)
		}
		return p + "-" + sl.Topology, ClassTPU, nil
	case accelerator.KindGPU:
		p, ok := xpkGPU[sl.Spec.NodeLabel]
		if !ok {
			return "", "", fmt.Errorf("xpk has no device type for %s", sl.Spec.Name)
		}
		return p + "-" + strconv.Itoa(sl.ChipsPerHost), ClassGPU, nil
	}
	return "", "", fmt.Errorf("xpk runs TPU and GPU workloads; %s is neither", sl.Spec.Name)
}
