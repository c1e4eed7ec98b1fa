package lifecycle

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
	// ReasonRoleFailed marks an experiment that failed because one of its roles failed.
	ReasonRoleFailed Reason = "RoleFailed"
	// ReasonSiblingFailed marks a job aborted because another role of its experiment failed.
	ReasonSiblingFailed Reason = "SiblingFailed"
	// ReasonAborted marks an artifact whose experiment was aborted.
	ReasonAborted Reason = "Aborted"
)

// PendingReasons and FailedReasons are the vocabularies a job may carry.
var (
	PendingReasons = []Reason{ReasonWaiting, ReasonProvisioning, ReasonProvisioningFallback, ReasonDispatching}
	FailedReasons  = []Reason{ReasonNodePoolTimeout, ReasonNodePoolFailed, ReasonJobSubmitFailed, ReasonJobFailed, ReasonTimeout}
)
