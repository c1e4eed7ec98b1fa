package fakegke

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	container "google.golang.org/api/container/v1"
)

// The fake's own knowledge of Compute Engine's GPU machine types, kept
// apart from Falcon's accelerator table on purpose: a wrong row there must
// be refused here, as GKE would refuse it, not agreed with.
//
// Accelerator-optimized machine types (A2, A3, A4, G2) come with their GPUs:
// the type and count are implied by the name, and a node pool's
// acceleratorConfig may only restate them. N1 machines have no GPUs of
// their own and take attached ones. Every other machine type takes none.
var (
	// a2-highgpu-8g, a3-megagpu-8g...: the family fixes the GPU, the
	// suffix the count.
	gpuFamilyRE = regexp.MustCompile(`^(a2-highgpu|a2-megagpu|a2-ultragpu|a3-highgpu|a3-edgegpu|a3-megagpu|a3-ultragpu|a4-highgpu)-([0-9]+)g$`)
	gpuFamilies = map[string]string{
		"a2-highgpu":  "nvidia-tesla-a100",
		"a2-megagpu":  "nvidia-tesla-a100",
		"a2-ultragpu": "nvidia-a100-80gb",
		"a3-highgpu":  "nvidia-h100-80gb",
		"a3-edgegpu":  "nvidia-h100-80gb",
		"a3-megagpu":  "nvidia-h100-mega-80gb",
		"a3-ultragpu": "nvidia-h200-141gb",
		"a4-highgpu":  "nvidia-b200",
	}
	// G2 names vCPUs, not GPUs: each size has its own L4 count.
	g2GPUs = map[string]int64{
		"g2-standard-4": 1, "g2-standard-8": 1, "g2-standard-12": 1, "g2-standard-16": 1, "g2-standard-32": 1,
		"g2-standard-24": 2, "g2-standard-48": 4, "g2-standard-96": 8,
	}
	// GPUs N1 machines accept attached.
	n1GPUs = map[string]bool{"nvidia-tesla-t4": true, "nvidia-tesla-v100": true, "nvidia-tesla-p100": true, "nvidia-tesla-p4": true}
	// gpuDriverVersions are GPUDriverInstallationConfig.gpuDriverVersion's values.
	gpuDriverVersions = map[string]bool{"GPU_DRIVER_VERSION_UNSPECIFIED": true, "INSTALLATION_DISABLED": true, "DEFAULT": true, "LATEST": true}
)

// ImpliedGPU returns the GPU type and count a machine type comes with
// (a3-highgpu-8g: nvidia-h100-80gb, 8); false for machine types without
// GPUs of their own.
func ImpliedGPU(machineType string) (acceleratorType string, count int64, ok bool) {
	if n, ok := g2GPUs[machineType]; ok {
		return "nvidia-l4", n, true
	}
	m := gpuFamilyRE.FindStringSubmatch(machineType)
	if m == nil {
		return "", 0, false
	}
	n, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil || n < 1 {
		return "", 0, false
	}
	return gpuFamilies[m[1]], n, true
}

// checkAccelerators validates a node pool's accelerators against its
// machine type as GKE does, returning GKE's INVALID_ARGUMENT message when
// it refuses them. For a machine type with GPUs of its own and no
// acceleratorConfig it returns the implied one, which GKE shows on the
// pool it returns; nil accels means the config stays as it was sent.
func checkAccelerators(cfg *container.NodeConfig) (accels []*container.AcceleratorConfig, msg string) {
	if cfg == nil {
		return nil, ""
	}
	mt := cfg.MachineType
	if len(cfg.Accelerators) > 1 {
		return nil, fmt.Sprintf("Node pool may have at most one accelerator type; got %d in nodePool.config.accelerators.", len(cfg.Accelerators))
	}
	implied, n, hasOwn := ImpliedGPU(mt)
	if len(cfg.Accelerators) == 0 {
		if hasOwn {
			return []*container.AcceleratorConfig{{AcceleratorType: implied, AcceleratorCount: n}}, ""
		}
		return nil, ""
	}
	a := cfg.Accelerators[0]
	switch {
	case a == nil || a.AcceleratorType == "":
		return nil, "Invalid value for field 'nodePool.config.accelerators[0].acceleratorType': \"\". Accelerator type must be specified."
	case a.AcceleratorCount < 1:
		return nil, fmt.Sprintf("Invalid value for field 'nodePool.config.accelerators[0].acceleratorCount': %d. Accelerator count must be at least 1.", a.AcceleratorCount)
	}
	if d := a.GpuDriverInstallationConfig; d != nil && d.GpuDriverVersion != "" && !gpuDriverVersions[d.GpuDriverVersion] {
		return nil, fmt.Sprintf("Invalid value for field 'nodePool.config.accelerators[0].gpuDriverInstallationConfig.gpuDriverVersion': %q. Valid values: DEFAULT, LATEST, INSTALLATION_DISABLED.", d.GpuDriverVersion)
	}
	switch {
	case hasOwn && a.AcceleratorType != implied:
		return nil, fmt.Sprintf("Accelerator type %q is not supported with machine type %q: the machine type comes with %d %s.", a.AcceleratorType, mt, n, implied)
	case hasOwn && a.AcceleratorCount != n:
		return nil, fmt.Sprintf("Invalid value for field 'nodePool.config.accelerators[0].acceleratorCount': %d. Machine type %q comes with %d %s.", a.AcceleratorCount, mt, n, implied)
	case hasOwn:
		return nil, ""
	case strings.HasPrefix(mt, "n1-") && n1GPUs[a.AcceleratorType]:
		return nil, ""
	case strings.HasPrefix(mt, "n1-"):
		return nil, fmt.Sprintf("Accelerator type %q is not supported with machine type %q.", a.AcceleratorType, mt)
	default:
		return nil, fmt.Sprintf("Machine type %q does not support accelerators; got %q. Use an accelerator-optimized machine type (a2, a3, a4, g2) or n1.", mt, a.AcceleratorType)
	}
}
