package queue

import "errors"

// Sentinel kinds. Every error the Scheduler returns wraps exactly one of them,
// so callers branch with errors.Is and map each kind once.
var (
	// ErrInvalid: the job or key is malformed (missing ID, actor, type,
	// topology or creation time, or a key that contradicts the job).
	ErrInvalid = errors.New("invalid job")
	// ErrNotFound: the job is not in any queue.
	ErrNotFound = errors.New("job not queued")
	// ErrConflict: the job ID is already queued under another key.
	ErrConflict = errors.New("job queued elsewhere")
	// ErrSlotBusy: another job already holds the queue's acquiring slot.
	ErrSlotBusy = errors.New("queue slot busy")
	// ErrNotAcquiring: the job is waiting, so it has no slot to release.
	ErrNotAcquiring = errors.New("job not acquiring")
	// ErrUnplaceable: no candidate cluster can take the job right now. The
	// error is an *UnplaceableError carrying a Reason and a message for the
	// job's Waiting status.
	ErrUnplaceable = errors.New("no cluster can take the job")
)

// Reason says why a job could not be placed, for callers that classify or
// count; the message is for people.
type Reason string

const (
	// NoActiveCluster: no active candidate offers the accelerator type.
	NoActiveCluster Reason = "NoActiveCluster"
	// QueuesFull: every active cluster offering the type is at its maximum
	// queue depth for the job's topology.
	QueuesFull Reason = "QueuesFull"
	// PinnedClusterUnavailable: the job is pinned to a cluster that is not a
	// candidate, not active, or does not offer the type.
	PinnedClusterUnavailable Reason = "PinnedClusterUnavailable"
	// NoAvailableCluster: under PolicyPriority, every active cluster
	// offering the type is unreachable, not probed yet, or past its
	// max_queue_depth (design 001's NoAvailableClusterError).
	NoAvailableCluster Reason = "NoAvailableCluster"
)

// UnplaceableError is returned by Select and Enqueue when no cluster fits.
// The job stays unassigned; its Error text is written to be shown as the
// job's Waiting message, and the caller simply retries on a later cycle.
type UnplaceableError struct {
	JobID   string
	Reason  Reason
	Message string // e.g. "no active cluster offers v7x"
}

func (e *UnplaceableError) Error() string { return e.Message }
func (e *UnplaceableError) Unwrap() error { return ErrUnplaceable }
