package accelerator

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Kind is what a device type is made of.
type Kind string

const (
	KindTPU Kind = "tpu"
	KindGPU Kind = "gpu"
	KindCPU Kind = "cpu" // no accelerator
)

// GKE node labels and extended resources. The node pool a Falcon job runs on
// carries these labels; the pod selects them and requests the resource.
const (
	LabelTPUAccelerator = "cloud.google.com/gke-tpu-accelerator"
	LabelTPUTopology    = "cloud.google.com/gke-tpu-topology"
	LabelGPUAccelerator = "cloud.google.com/gke-accelerator"
	LabelNodePool       = "cloud.google.com/gke-nodepool"

	ResourceTPU = "google.com/tpu"
	ResourceGPU = "nvidia.com/gpu"
)

// MachineType is a Compute Engine machine type and how many accelerator
// chips (TPU chips or GPUs) one VM of it has.
type MachineType struct {
	Name  string
	Chips int
}

// Spec is what Falcon knows about one device type.
type Spec struct {
	// Name is the canonical name, as Falcon prints it (v7x, nvidia-h100-80gb, cpu).
	Name string
	// Aliases are other names users write for the same type, matched
	// case-insensitively like Name.
	Aliases []string
	Kind    Kind
	// NodeLabel is the value of LabelTPUAccelerator (TPU) or
	// LabelGPUAccelerator (GPU) on the nodes; empty for CPU.
	NodeLabel string
	// MachineTypes in ascending order of chips. For a TPU, a single-host
	// slice uses the machine type with exactly its chip count, and a
	// multi-host slice is built from the one with ChipsPerHost chips. For a
	// GPU, device_count picks the machine type by its GPU count.
	MachineTypes []MachineType

	// TPU only.

	// TopologyDims is 2 (NxM) or 3 (NxMxK).
	TopologyDims int
	// ChipsPerHost is the chip count of each host of a multi-host slice.
	ChipsPerHost int
	// DevicesPerChip is how many JAX devices one chip shows: 2 on v7x, whose
	// chips have two TensorCores that JAX addresses separately.
	DevicesPerChip int
	// HostTopology is the topology of one full host (2x2, 2x2x1), used in
	// messages as the example of a valid value.
	HostTopology string
	// PlacementPolicy reports that a multi-host node pool of this type is
	// created with a workload policy (gcloud compute resource-policies
	// create workload-policy --accelerator-topology=T, then
	// --placement-policy) instead of --tpu-topology: GKE's rule for v7x.
	PlacementPolicy bool

	// GPU only.

	// DefaultGPUs is the GPU count per host that device_count 0 means.
	DefaultGPUs int

	// Peak figures of one chip (TPU) or one GPU as the vendor publishes
	// them, for profile analysis (utilization = achieved / peak): dense
	// bf16 FLOP/s (without sparsity) and HBM bandwidth in bytes/s. The
	// source of each row is beside it. Zero for cpu.
	PeakFLOPS             float64
	PeakHBMBytesPerSecond float64
}

// DevicePeak returns the peak dense bf16 FLOP/s and HBM bytes/s of one
// device as a profile sees it: a TPU profile has a plane per JAX device,
// and a v7x chip is two of them, so the chip's figures are divided by
// DevicesPerChip; a GPU is one device. Zero for cpu.
func (s Spec) DevicePeak() (flops, hbmBytesPerSecond float64) {
	n := float64(max(s.DevicesPerChip, 1))
	return s.PeakFLOPS / n, s.PeakHBMBytesPerSecond / n
}

// Names returns Name followed by Aliases.
func (s Spec) Names() []string { return append([]string{s.Name}, s.Aliases...) }

// table is every device type Falcon can place. Keep TPUs first, newest last
// within each kind; the order is the order of the "known types" message.
var table = []Spec{
	{
		Name:         "v5e",
		Aliases:      []string{"tpu-v5e", "v5litepod", "tpu-v5-lite-podslice", "tpu-v5-lite"},
		Kind:         KindTPU,
		NodeLabel:    "tpu-v5-lite-podslice",
		MachineTypes: []MachineType{{"ct5lp-hightpu-1t", 1}, {"ct5lp-hightpu-4t", 4}, {"ct5lp-hightpu-8t", 8}},
		TopologyDims: 2, ChipsPerHost: 4, DevicesPerChip: 1, HostTopology: "2x2",
		// docs.cloud.google.com/tpu/docs/v5e: 197 TFLOPs bf16, HBM2 819 GBps.
		PeakFLOPS: 197e12, PeakHBMBytesPerSecond: 819e9,
	},
	{
		Name:         "v5p",
		Aliases:      []string{"tpu-v5p", "tpu-v5p-slice"},
		Kind:         KindTPU,
		NodeLabel:    "tpu-v5p-slice",
		MachineTypes: []MachineType{{"ct5p-hightpu-4t", 4}},
		TopologyDims: 3, ChipsPerHost: 4, DevicesPerChip: 1, HostTopology: "2x2x1",
		// docs.cloud.google.com/tpu/docs/v5p: 459 TFLOPs bf16, HBM2e 2765 GBps.
		PeakFLOPS: 459e12, PeakHBMBytesPerSecond: 2765e9,
	},
	{
		Name:         "v6e",
		Aliases:      []string{"tpu-v6e", "tpu-v6e-slice", "trillium"},
		Kind:         KindTPU,
		NodeLabel:    "tpu-v6e-slice",
		MachineTypes: []MachineType{{"ct6e-standard-1t", 1}, {"ct6e-standard-4t", 4}, {"ct6e-standard-8t", 8}},
		TopologyDims: 2, ChipsPerHost: 4, DevicesPerChip: 1, HostTopology: "2x2",
		// docs.cloud.google.com/tpu/docs/v6e: 918 TFLOPs bf16, HBM 1638 GBps.
		PeakFLOPS: 918e12, PeakHBMBytesPerSecond: 1638e9,
	},
	{
		Name:         "v7x",
		Aliases:      []string{"tpu7x", "tpu-v7x", "ironwood"},
		Kind:         KindTPU,
		NodeLabel:    "tpu7x",
		MachineTypes: []MachineType{{"tpu7x-standard-4t", 4}},
		TopologyDims: 3, ChipsPerHost: 4, DevicesPerChip: 2, HostTopology: "2x2x1",
		PlacementPolicy: true,
		// docs.cloud.google.com/tpu/docs/tpu7x: 2307 TFLOPs bf16 (4614 fp8),
		// HBM 7380 GBps, per chip of two TensorCores (two JAX devices).
		PeakFLOPS: 2307e12, PeakHBMBytesPerSecond: 7380e9,
	},
	{
		Name:         "nvidia-l4",
		Aliases:      []string{"l4"},
		Kind:         KindGPU,
		NodeLabel:    "nvidia-l4",
		MachineTypes: []MachineType{{"g2-standard-4", 1}, {"g2-standard-24", 2}, {"g2-standard-48", 4}, {"g2-standard-96", 8}},
		DefaultGPUs:  8,
		// NVIDIA L4 datasheet: 242 TFLOPS bf16 with sparsity (121 dense), 300 GB/s.
		PeakFLOPS: 121e12, PeakHBMBytesPerSecond: 300e9,
	},
	{
		Name:         "nvidia-tesla-a100",
		Aliases:      []string{"a100", "a100-40gb", "nvidia-a100-40gb"},
		Kind:         KindGPU,
		NodeLabel:    "nvidia-tesla-a100",
		MachineTypes: []MachineType{{"a2-highgpu-1g", 1}, {"a2-highgpu-2g", 2}, {"a2-highgpu-4g", 4}, {"a2-highgpu-8g", 8}, {"a2-megagpu-16g", 16}},
		DefaultGPUs:  8,
		// NVIDIA A100 datasheet (40GB SXM): 312 TFLOPS bf16 dense, HBM2 1555 GB/s.
		PeakFLOPS: 312e12, PeakHBMBytesPerSecond: 1555e9,
	},
	{
		Name:         "nvidia-a100-80gb",
		Aliases:      []string{"a100-80gb"},
		Kind:         KindGPU,
		NodeLabel:    "nvidia-a100-80gb",
		MachineTypes: []MachineType{{"a2-ultragpu-1g", 1}, {"a2-ultragpu-2g", 2}, {"a2-ultragpu-4g", 4}, {"a2-ultragpu-8g", 8}},
		DefaultGPUs:  8,
		// NVIDIA A100 datasheet (80GB SXM): 312 TFLOPS bf16 dense, HBM2e 2039 GB/s.
		PeakFLOPS: 312e12, PeakHBMBytesPerSecond: 2039e9,
	},
	{
		Name:         "nvidia-h100-80gb",
		Aliases:      []string{"h100", "h100-80gb"},
		Kind:         KindGPU,
		NodeLabel:    "nvidia-h100-80gb",
		MachineTypes: []MachineType{{"a3-highgpu-1g", 1}, {"a3-highgpu-2g", 2}, {"a3-highgpu-4g", 4}, {"a3-highgpu-8g", 8}},
		DefaultGPUs:  8,
		// NVIDIA H100 datasheet (SXM): 1979 TFLOPS bf16 with sparsity (989 dense), HBM3 3.35 TB/s.
		PeakFLOPS: 989e12, PeakHBMBytesPerSecond: 3350e9,
	},
	{
		Name:         "nvidia-h100-mega-80gb",
		Aliases:      []string{"h100-mega", "h100-mega-80gb"},
		Kind:         KindGPU,
		NodeLabel:    "nvidia-h100-mega-80gb",
		MachineTypes: []MachineType{{"a3-megagpu-8g", 8}},
		DefaultGPUs:  8,
		// The same H100 SXM as nvidia-h100-80gb (A3 Mega differs in networking).
		PeakFLOPS: 989e12, PeakHBMBytesPerSecond: 3350e9,
	},
	{
		Name:         "nvidia-h200-141gb",
		Aliases:      []string{"h200", "h200-141gb"},
		Kind:         KindGPU,
		NodeLabel:    "nvidia-h200-141gb",
		MachineTypes: []MachineType{{"a3-ultragpu-8g", 8}},
		DefaultGPUs:  8,
		// NVIDIA H200 datasheet (SXM): 989 TFLOPS bf16 dense, HBM3e 4.8 TB/s.
		PeakFLOPS: 989e12, PeakHBMBytesPerSecond: 4800e9,
	},
	{
		Name:         "nvidia-b200",
		Aliases:      []string{"b200"},
		Kind:         KindGPU,
		NodeLabel:    "nvidia-b200",
		MachineTypes: []MachineType{{"a4-highgpu-8g", 8}},
		DefaultGPUs:  8,
		// NVIDIA HGX B200 datasheet: 4.5 PFLOPS bf16 with sparsity per GPU (2.25 dense), HBM3e 8 TB/s.
		PeakFLOPS: 2250e12, PeakHBMBytesPerSecond: 8000e9,
	},
	{
		Name: "cpu",
		Kind: KindCPU,
	},
}

// byName maps every lower-case name and alias to its row in table.
var byName = func() map[string]int {
	m := map[string]int{}
	for i, s := range table {
		for _, n := range s.Names() {
			k := strings.ToLower(n)
			if j, dup := m[k]; dup {
				panic(fmt.Sprintf("accelerator: %q names both %s and %s", n, table[j].Name, s.Name))
			}
			m[k] = i
		}
	}
	return m
}()

// Specs returns every known device type, in table order.
func Specs() []Spec {
	out := make([]Spec, len(table))
	for i, s := range table {
		out[i] = s.clone()
	}
	return out
}

// Lookup returns the Spec named deviceType, matching names and aliases
// case-insensitively. An empty deviceType is cpu: a task that names no
// accelerator needs none. An unknown name is an errdefs.FieldError on
// device_type that lists the known types.
func Lookup(deviceType string) (Spec, error) {
	k := strings.ToLower(strings.TrimSpace(deviceType))
	if k == "" {
		k = "cpu"
	}
	i, ok := byName[k]
	if !ok {
		names := make([]string, len(table))
		for j, s := range table {
			names[j] = s.Name
		}
		return Spec{}, errdefs.Invalid("device_type", "unknown device type %q; known types: %s (aliases such as tpu-v7x, tpu7x, tpu-v5p, v5litepod and h100 also work)",
			deviceType, strings.Join(names, ", "))
	}
	return table[i].clone(), nil
}

func (s Spec) clone() Spec {
	s.Aliases = slices.Clone(s.Aliases)
	s.MachineTypes = slices.Clone(s.MachineTypes)
	return s
}

// Toleration is a taint GKE puts on the nodes of this type, to be tolerated
// with operator Exists: google.com/tpu and nvidia.com/gpu, effect NoSchedule.
type Toleration struct {
	Key      string
	Operator string // always "Exists"
	Effect   string
}

// Slice is a checked placement: how many hosts of which machine a task
// needs, and what its pods must select and request.
type Slice struct {
	Spec Spec
	// Topology is the TPU topology, lower-cased (2x2x4); empty otherwise.
	Topology string
	// Chips in the whole slice: TPU chips, or GPUs over all hosts.
	Chips int
	// Hosts is the number of VMs, and so of pods: equal to the task's replica.
	Hosts int
	// ChipsPerHost is TPU chips (or GPUs) on each host; for a single-host TPU
	// slice smaller than a full host it is the slice's chip count.
	ChipsPerHost int
	// DevicesPerHost is JAX devices on each host: what device_count means.
	DevicesPerHost int
	// MachineType of every host; empty for CPU (any machine will do).
	MachineType string
	// NodeSelector the pods must carry; nil for CPU.
	NodeSelector map[string]string
	// ResourceName is google.com/tpu or nvidia.com/gpu, requested
	// ResourcePerHost times by each pod; empty for CPU.
	ResourceName    string
	ResourcePerHost int
	// Toleration the pods need; nil for CPU.
	Toleration *Toleration
}

// MultiHost reports whether the slice spans more than one host, and so needs
// a coordinator and stable DNS names for its ranks.
func (sl Slice) MultiHost() bool { return sl.Hosts > 1 }

// PoolShape names the node pools that can serve the slice, as Falcon labels
// its pools and matches an idle one to the next job: a TPU slice's
// topology (2x2x4), which fixes its hosts; for a GPU slice its hosts and
// GPUs per host (1x8gpu, 2x4gpu), because a GPU count is a machine type of
// its own and a pool has a fixed number of nodes, so a pool of another
// count or size would leave GPUs idle or pods unschedulable. Empty for CPU.
func (sl Slice) PoolShape() string {
	switch sl.Spec.Kind {
	case KindTPU:
		return sl.Topology
	case KindGPU:
		return fmt.Sprintf("%dx%dgpu", sl.Hosts, sl.ChipsPerHost)
	}
	return ""
}

// NeedsPlacementPolicy reports whether the slice's node pool must be created
// with a workload policy rather than --tpu-topology (multi-host v7x).
func (sl Slice) NeedsPlacementPolicy() bool { return sl.Spec.PlacementPolicy && sl.MultiHost() }

// maxChips bounds the product of a topology's dimensions, far above any real
// slice (a v7x pod is 9216 chips), so the arithmetic cannot overflow.
const maxChips = 1 << 20

// Resolve is Lookup followed by Slice, for callers that hold a task spec's
// four fields. Its error is Lookup's *errdefs.FieldError or Slice's
// errdefs.FieldErrors; both are errdefs.ErrInvalid.
func Resolve(deviceType, topology string, replica, deviceCount int) (Slice, error) {
	s, err := Lookup(deviceType)
	if err != nil {
		return Slice{}, err
	}
	return s.Slice(topology, replica, deviceCount)
}

// Slice checks a task's device_topo, replica (hosts) and device_count (JAX
// devices per host, 0 for the default: every device of the host) against s
// and returns the placement. For a TPU the topology is the whole slice and
// fixes the host count, which replica must match; for a GPU or CPU the
// topology must be empty and replica is simply the host count.
//
// The error, if any, is errdefs.FieldErrors with every problem found, on
// the fields replica, device_count and device_topo.
func (s Spec) Slice(topology string, replica, deviceCount int) (Slice, error) {
	var errs errdefs.FieldErrors
	// A TPU's missing replica (0) is told what its topology needs
	// (tpuSlice).
	if replica < 0 || replica == 0 && s.Kind != KindTPU {
		errs.Add("replica", "must be at least 1 (the number of hosts), got %d", replica)
	}
	if deviceCount < 0 {
		errs.Add("device_count", "must be 0 (every device of the host) or positive, got %d", deviceCount)
	}
	var sl Slice
	switch s.Kind {
	case KindTPU:
		sl = s.tpuSlice(&errs, topology, replica, deviceCount)
	case KindGPU:
		sl = s.gpuSlice(&errs, topology, replica, deviceCount)
	default:
		sl = s.cpuSlice(&errs, topology, replica, deviceCount)
	}
	if err := errs.Err(); err != nil {
		return Slice{}, err
	}
	return sl, nil
}

func (s Spec) tpuSlice(errs *errdefs.FieldErrors, topology string, replica, deviceCount int) Slice {
	form := "NxM"
	if s.TopologyDims == 3 {
		form = "NxMxK"
	}
	topo := strings.ToLower(strings.TrimSpace(topology))
	if topo == "" {
		errs.Add("device_topo", "is required for %s: the whole slice as %s, e.g. %s for one host of %d chips", s.Name, form, s.HostTopology, s.ChipsPerHost)
		return Slice{}
	}
	dims, ok := parseTopology(topo)
	if !ok {
		errs.Add("device_topo", "%q must be %s with positive integers, e.g. %s", topology, form, s.HostTopology)
		return Slice{}
	}
	if len(dims) != s.TopologyDims {
		errs.Add("device_topo", "%s topologies are %dD (%s, e.g. %s); got %s", s.Name, s.TopologyDims, form, s.HostTopology, topo)
		return Slice{}
	}
	chips := 1
	for _, d := range dims {
		if d > maxChips/chips {
			errs.Add("device_topo", "topology %s is more than %d chips, larger than any %s slice", topo, maxChips, s.Name)
			return Slice{}
		}
		chips *= d
	}

	single, hasSingle := s.machine(chips)
	hostMachine, _ := s.machine(s.ChipsPerHost)
	multiOK := chips > s.ChipsPerHost && chips%s.ChipsPerHost == 0
	sl := Slice{Spec: s, Topology: topo, Chips: chips, ResourceName: ResourceTPU,
		Toleration: &Toleration{Key: ResourceTPU, Operator: "Exists", Effect: "NoSchedule"}}
	switch {
	case hasSingle && (replica == 1 || !multiOK):
		sl.Hosts, sl.ChipsPerHost, sl.MachineType = 1, chips, single.Name
	case multiOK:
		sl.Hosts, sl.ChipsPerHost, sl.MachineType = chips/s.ChipsPerHost, s.ChipsPerHost, hostMachine.Name
	default:
		errs.Add("device_topo", "topology %s is %s; a %s host has %s, and larger slices are whole hosts of %d chips",
			topo, count(chips, "chip"), s.Name, s.singleHostChips(), s.ChipsPerHost)
		return Slice{}
	}
	sl.DevicesPerHost = sl.ChipsPerHost * s.DevicesPerChip
	sl.ResourcePerHost = sl.ChipsPerHost
	sl.NodeSelector = map[string]string{LabelTPUAccelerator: s.NodeLabel, LabelTPUTopology: topo}

	if replica >= 0 && replica != sl.Hosts {
		shape := fmt.Sprintf("%s = %s of %s", count(chips, "chip"), count(sl.Hosts, "host"), count(sl.ChipsPerHost, "chip"))
		want := strconv.Itoa(sl.Hosts)
		if hasSingle && multiOK { // e.g. v5e 2x4: one 8-chip host or two 4-chip hosts
			shape += fmt.Sprintf(" (or 1 host of %d chips)", chips)
			want += " (or 1)"
		}
		if replica == 0 {
			errs.Add("replica", "is required: topology %s is %s; set replica: %s", topo, shape, want)
		} else {
			errs.Add("replica", "topology %s is %s; replica must be %s, got %d", topo, shape, want, replica)
		}
	}
	if deviceCount > 0 && deviceCount != sl.DevicesPerHost {
		hint := ""
		switch {
		case s.DevicesPerChip > 1 && deviceCount == sl.ChipsPerHost:
			hint = " (device_count counts JAX devices per host, not chips)"
		case sl.Hosts > 1 && deviceCount == sl.Hosts*sl.DevicesPerHost:
			hint = " (device_count is per host; that is the whole slice)"
		}
		errs.Add("device_count", "%s has %s per chip: %s per host = %s; got %d%s",
			s.Name, count(s.DevicesPerChip, "device"), count(sl.ChipsPerHost, "chip"), count(sl.DevicesPerHost, "device"), deviceCount, hint)
	}
	return sl
}

func (s Spec) gpuSlice(errs *errdefs.FieldErrors, topology string, replica, deviceCount int) Slice {
	if t := strings.TrimSpace(topology); t != "" {
		errs.Add("device_topo", "must be empty for %s: GPUs have no slice topology; set device_count (GPUs per host) and replica (hosts) instead of %s", s.Name, t)
	}
	gpus := deviceCount
	if gpus == 0 {
		gpus = s.DefaultGPUs
	}
	m, ok := s.machine(gpus)
	if !ok && deviceCount > 0 {
		counts := make([]string, len(s.MachineTypes))
		for i, mt := range s.MachineTypes {
			counts[i] = strconv.Itoa(mt.Chips)
		}
		errs.Add("device_count", "%s hosts have %s GPUs; got %d", s.Name, orList(counts), deviceCount)
		return Slice{}
	}
	hosts := max(replica, 1)
	return Slice{
		Spec: s, Chips: hosts * gpus, Hosts: hosts, ChipsPerHost: gpus, DevicesPerHost: gpus,
		MachineType:  m.Name,
		NodeSelector: map[string]string{LabelGPUAccelerator: s.NodeLabel},
		ResourceName: ResourceGPU, ResourcePerHost: gpus,
		Toleration: &Toleration{Key: ResourceGPU, Operator: "Exists", Effect: "NoSchedule"},
	}
}

func (s Spec) cpuSlice(errs *errdefs.FieldErrors, topology string, replica, deviceCount int) Slice {
	if t := strings.TrimSpace(topology); t != "" {
		errs.Add("device_topo", "%s has no topology; set device_type to the accelerator the %s slice is made of (e.g. v7x, v6e)", s.Name, t)
	}
	if deviceCount > 0 {
		errs.Add("device_count", "must be 0 for %s (no accelerator), got %d; set device_type to use accelerators", s.Name, deviceCount)
	}
	return Slice{Spec: s, Hosts: max(replica, 1)}
}

// machine returns the machine type with exactly chips chips.
func (s Spec) machine(chips int) (MachineType, bool) {
	i := slices.IndexFunc(s.MachineTypes, func(m MachineType) bool { return m.Chips == chips })
	if i < 0 {
		return MachineType{}, false
	}
	return s.MachineTypes[i], true
}

// singleHostChips says how many chips a single host can have: "4 chips",
// "1, 4 or 8 chips".
func (s Spec) singleHostChips() string {
	counts := make([]string, len(s.MachineTypes))
	for i, m := range s.MachineTypes {
		counts[i] = strconv.Itoa(m.Chips)
	}
	return orList(counts) + " chips"
}

// parseTopology splits "2x2x4" into [2 2 4]; every dimension must be a
// positive integer.
func parseTopology(t string) ([]int, bool) {
	parts := strings.Split(t, "x")
	dims := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || strings.HasPrefix(p, "+") {
			return nil, false
		}
		dims[i] = n
	}
	return dims, len(dims) >= 2
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// orList joins ["1","4","8"] as "1, 4 or 8".
func orList(xs []string) string {
	if len(xs) <= 1 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}
