package xpk

import (
	"strconv"
	"time"
)

// State is a workload's state as design 001 names them.
type State string

// The states of 001's WorkloadStatus and WorkloadInfo.
const (
	StateQueued    State = "QUEUED"
	StateRunning   State = "RUNNING"
	StateCompleted State = "COMPLETED"
	StateFailed    State = "FAILED"
	StateUnknown   State = "UNKNOWN"
)

// Device classes: which flag names the accelerator type.
const (
	ClassTPU = "tpu" // --tpu-type
	ClassGPU = "gpu" // --device-type
)

// Cluster is what the manager needs of a registered xpk cluster (001's
// ClusterConfig).
type Cluster struct {
	// Name is the cluster's name in Falcon's registry, for messages.
	Name string
	// ClusterID, Project and Zone locate the GKE cluster (--cluster,
	// --project, --zone).
	ClusterID, Project, Zone string
	// DefaultNamespace is used when a spec names none.
	DefaultNamespace string
	// Path is the xpk executable; empty is "xpk" on PATH.
	Path string
	// Env is added to xpk's environment: KUBECONFIG and the like, prepared
	// once per cluster (001's concurrency note).
	Env []string
}

func (c Cluster) path() string {
	if c.Path == "" {
		return "xpk"
	}
	return c.Path
}

// WorkloadSpec is 001's WorkloadSpec: what to run.
type WorkloadSpec struct {
	// Name is the workload's name: [a-z]([-a-z0-9]*[a-z0-9])?, at most 40
	// characters, as xpk's parser requires.
	Name        string
	DockerImage string
	// Command is joined with spaces into --command, which xpk runs with a
	// shell on every VM.
	Command []string
	// AcceleratorType is xpk's own name for the type (v5p-2x2x4,
	// h100-80gb-8); see TPUType and GPUType.
	AcceleratorType string
	// DeviceClass is ClassTPU or ClassGPU.
	DeviceClass string
	// Priority is one of xpk's: very-low, low, medium, high, very-high.
	Priority  string
	Env       map[string]string
	Namespace string // empty: the cluster's default
	// NumSlices is passed as --num-slices when above 1.
	NumSlices int
	// NumNodes is passed as --num-nodes when above 1 (GPU hosts).
	NumNodes int
	// ExtraArgs are appended verbatim, last.
	ExtraArgs []string
}

// WorkloadHandle identifies a submitted workload (001's WorkloadHandle).
type WorkloadHandle struct {
	WorkloadName string
	Cluster      string
	Namespace    string
	SubmittedAt  time.Time
}

// WorkloadStatus is 001's WorkloadStatus, with xpk's own words kept in
// Status and Message.
type WorkloadStatus struct {
	WorkloadName string
	State        State
	StartTime    *time.Time
	EndTime      *time.Time
	// ExitCode is unknown to xpk's table: always nil.
	ExitCode *int
	// Status and Message are xpk's Status and Status Message columns.
	Status, Message string
}

// WorkloadInfo is one row of `xpk workload list` (001's WorkloadInfo, with
// every column of the table).
type WorkloadInfo struct {
	Name  string
	State State
	// AcceleratorType is not in xpk's table: empty.
	AcceleratorType string
	StartTime       *time.Time // Created Time
	CreatedTime     string
	Priority        string
	// VM counts; -1 where xpk prints <none>.
	VMsNeeded, VMsRunning, VMsDone    int
	Status, StatusMessage, StatusTime string
}

// WorkloadName is the workload of a Falcon job: deterministic, so a retried
// dispatch finds what an earlier one created.
func WorkloadName(jobID string) string { return "falcon-" + jobID }

// SliceJobName is the Kubernetes Job of one slice of a workload. xpk's
// JobSet has one replicated job, "slice-job", with a replica per slice,
// and JobSet names each Job <jobset>-<replicatedJob>-<index>; the pods'
// batch.kubernetes.io/job-name label, which Cloud Logging's entries carry,
// is this name.
func SliceJobName(workload string, slice int) string {
	return workload + "-slice-job-" + strconv.Itoa(slice)
}
