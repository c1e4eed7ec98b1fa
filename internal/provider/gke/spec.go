package gke

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	container "google.golang.org/api/container/v1"

	"github.com/falconhq/falcon/internal/accelerator"
)

// PoolPrefix starts the name of every node pool Falcon creates; the orphan
// sweep lists pools by it.
const PoolPrefix = "falcon-"

// Node labels on every Falcon pool (config.labels, so Kubernetes labels on
// its nodes). They live under falcon.dev/ rather than app.kubernetes.io/
// because kubelets may not set labels in the kubernetes.io namespace.
// GKE's node pool has no create time and no scale-down delay of its own, so
// both are recorded here too.
const (
	LabelManagedBy     = "falcon.dev/managed-by"
	ManagedBy          = "falcon"
	LabelJobID         = "falcon.dev/job-id"
	LabelSupplyMode    = "falcon.dev/supply-mode"
	LabelCreatedAt     = "falcon.dev/created-at" // Unix seconds
	LabelScaleDownTime = "falcon.dev/scale-down-unneeded-time"
	// LabelAccelerator and LabelTopology say which slices a pool can serve
	// once its first job is done: single-host pools have no placement
	// policy to read the topology from, and v7x pools name a workload
	// policy instead. A GPU pool's "topology" is its shape, hosts x GPUs
	// per host (accelerator.Slice.PoolShape), since a GPU slice has none
	// and a pool of another GPU count or size cannot serve it.
	LabelAccelerator = "falcon.dev/accelerator" // canonical name, e.g. v5p
	LabelTopology    = "falcon.dev/topology"    // e.g. 2x2x4, 1x8gpu
)

// GPUDriverVersion is the NVIDIA driver GKE installs on Falcon's GPU
// nodes. Without a driver installation config GKE's default depends on the
// cluster version (older ones install none, and pods then wait for a
// device plugin that never reports GPUs); LATEST is what the CUDA images
// of current frameworks need.
const GPUDriverVersion = "LATEST"

const maxPoolName = 40 // GKE's limit on node pool names

var poolNameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// PoolName is the node pool of a job: deterministic, so a restarted
// controller finds the pool it was creating. IDs too long for GKE's 40
// characters keep a prefix and gain a hash of the whole ID.
func PoolName(jobID string) (string, error) { return poolName(jobID, maxPoolName) }

// poolName is PoolName within limit characters.
func poolName(jobID string, limit int) (string, error) {
	id := strings.ToLower(jobID)
	name := PoolPrefix + id
	if len(name) > limit {
		sum := sha256.Sum256([]byte(id))
		keep := limit - len(PoolPrefix) - 9
		name = PoolPrefix + strings.TrimRight(id[:keep], "-") + "-" + hex.EncodeToString(sum[:4])
	}
	if !poolNameRE.MatchString(name) {
		return "", fmt.Errorf("job ID %q does not make a valid GKE node pool name (%q): lowercase letters, digits and hyphens only", jobID, name)
	}
	return name, nil
}

// poolSpec builds the node pool for slice in the chosen mode.
func (m *Manager) poolSpec(name, jobID string, sl accelerator.Slice, mode SupplyMode, res *reservationRef, now time.Time) *container.NodePool {
	hosts := int64(sl.Hosts)
	scaleDown := m.opts.flexScaleDown
	if mode == SupplyReservation {
		scaleDown = m.opts.reservationScaleDown
	}
	cfg := &container.NodeConfig{
		MachineType: sl.MachineType,
		Labels: map[string]string{
			LabelManagedBy:     ManagedBy,
			LabelJobID:         jobID,
			LabelSupplyMode:    string(mode),
			LabelCreatedAt:     strconv.FormatInt(now.Unix(), 10),
			LabelScaleDownTime: strconv.FormatInt(int64(scaleDown/time.Second), 10) + "s",
			LabelAccelerator:   sl.Spec.Name,
			LabelTopology:      sl.PoolShape(),
		},
	}
	if sl.Spec.Kind == accelerator.KindGPU {
		// The machine type implies its GPUs (a3-highgpu-8g: 8 H100), but
		// GKE installs a driver only when the config asks for one, and
		// stating type and count makes GKE refuse a mismatched table row
		// instead of creating nodes no pod selects. The accelerator type
		// is the GKE node label's value (nvidia-h100-80gb).
		cfg.Accelerators = []*container.AcceleratorConfig{{
			AcceleratorType:             sl.Spec.NodeLabel,
			AcceleratorCount:            int64(sl.ChipsPerHost),
			GpuDriverInstallationConfig: &container.GPUDriverInstallationConfig{GpuDriverVersion: GPUDriverVersion},
		}}
	}
	if t := sl.Toleration; t != nil {
		// GKE taints TPU and GPU nodes itself; stating it keeps non-
		// accelerator pods off the pool even if that default changes.
		cfg.Taints = []*container.NodeTaint{{Key: t.Key, Value: "present", Effect: "NO_SCHEDULE"}}
	}
	np := &container.NodePool{
		Name:             name,
		InitialNodeCount: hosts,
		Config:           cfg,
		// Scale-down is what releases an idle pool's VMs; the delay itself
		// is a cluster-autoscaler setting GKE does not expose per pool in
		// the v1 API, hence the label above.
		Autoscaling: &container.NodePoolAutoscaling{
			Enabled:           true,
			TotalMinNodeCount: 0,
			TotalMaxNodeCount: hosts,
			LocationPolicy:    "ANY",
		},
	}
	switch mode {
	case SupplyReservation:
		cfg.ReservationAffinity = &container.ReservationAffinity{
			ConsumeReservationType: "SPECIFIC_RESERVATION",
			Key:                    "compute.googleapis.com/reservation-name",
			Values:                 []string{res.affinityValue},
		}
		np.Locations = []string{res.zone}
	case SupplyFlexStart:
		cfg.FlexStart = true
	}
	if sl.Spec.Kind == accelerator.KindTPU && sl.MultiHost() {
		np.PlacementPolicy = &container.PlacementPolicy{Type: "COMPACT", TpuTopology: sl.Topology}
		if sl.NeedsPlacementPolicy() {
			// v7x: GKE takes the topology from a workload policy (a Compute
			// resource policy with workloadPolicy.acceleratorTopology), not
			// from tpuTopology.
			np.PlacementPolicy = &container.PlacementPolicy{Type: "COMPACT", PolicyName: m.opts.workloadPolicy(sl)}
		}
	}
	return np
}

// DefaultWorkloadPolicy names the Compute workload policy a v7x slice's pool
// uses: one per accelerator and topology, e.g. falcon-v7x-2x2x2.
func DefaultWorkloadPolicy(sl accelerator.Slice) string {
	return PoolPrefix + strings.ToLower(sl.Spec.Name) + "-" + sl.Topology
}
