package lifecycle

import "strings"

// Reason is a CamelCase, machine-readable cause attached to a status. It is
// set only while Pending (what is happening now) and when Failed (why it
// failed); other statuses leave it empty because the status says enough.
type Reason string

// Pending reasons: what the job is doing now.
const (
	ReasonWaiting              Reason = "Waiting"
	ReasonProvisioning         Reason = "Provisioning"
	ReasonProvisioningFallback Reason = "ProvisioningFallback"
	ReasonDispatching          Reason = "Dispatching"
	// ReasonWaitingForPool: picked, and holding its queue's slot, but its
	// cluster already has as many pools of the shape as the pool cap
	// allows (cap=N): it takes the first that falls free, or creates one
	// once there are fewer.
	ReasonWaitingForPool Reason = "WaitingForPool"
	// ReasonNext: picked to take its queue's slot the moment the job
	// holding it runs or ends, and recorded with its cluster, so that the
	// handover needs no write first (see PendingPhases). It does not hold
	// the slot.
	ReasonNext Reason = "Next"
)

// Failed reasons: why the job failed.
const (
	ReasonNodePoolTimeout Reason = "NodePoolTimeout"
	ReasonNodePoolFailed  Reason = "NodePoolFailed"
	ReasonJobSubmitFailed Reason = "JobSubmitFailed"
	ReasonJobFailed       Reason = "JobFailed"
	ReasonTimeout         Reason = "Timeout"
)

// Experiment and artifact reasons, used when a failure or abort is
// propagated upwards from a job.
const (
	// ReasonRoleFailed marks an experiment that failed because one of its roles was aborted on its own.
	ReasonRoleFailed Reason = "RoleFailed"
	// ReasonAborted marks an artifact whose experiment was aborted.
	ReasonAborted Reason = "Aborted"
)

// PendingReasons and FailedReasons are the vocabularies a job may carry.
var (
	PendingReasons = []Reason{ReasonWaiting, ReasonNext, ReasonWaitingForPool, ReasonProvisioning, ReasonProvisioningFallback, ReasonDispatching}
	FailedReasons  = []Reason{ReasonNodePoolTimeout, ReasonNodePoolFailed, ReasonJobSubmitFailed, ReasonJobFailed, ReasonTimeout}
)

// A job stopped because another role of its experiment failed is Aborting,
// then Aborted, and like every abort carries no Reason (000 section 9); its
// Message says which role sank the experiment, in this one format, so that
// the experiment's own failure is not blamed on the stopped role.
const siblingStopPrefix = "stopped because role "

// SiblingStopMessage is the Message of a job stopped because role failed.
func SiblingStopMessage(role string) string { return siblingStopPrefix + role + " failed" }

// IsSiblingStop reports whether an aborted job's Message says it was stopped
// for another role rather than aborted on its own.
func IsSiblingStop(msg string) bool { return strings.HasPrefix(msg, siblingStopPrefix) }
