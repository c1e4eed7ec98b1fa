package local

import (
	"context"
	"fmt"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/placement"
	"github.com/falconhq/falcon/internal/resourcemanager"
)

// BackendName is the value of a cluster's backend field for local clusters.
const BackendName = "local"

// Backend adapts an Executor to the resource manager's Backend interface.
type Backend struct{ exec *Executor }

var _ resourcemanager.Starter = (*Backend)(nil)

// StartsProcesses marks the backend as one that starts a job's processes
// itself (resourcemanager.Starter): a kill can cut a start short.
func (b *Backend) StartsProcesses() {}

// NewBackend returns a resource-manager backend running jobs on exec.
func NewBackend(exec *Executor) *Backend { return &Backend{exec: exec} }

// Dispatch starts the job's ranks; a job the executor already knows is left alone.
func (b *Backend) Dispatch(ctx context.Context, _ *falconv1.Cluster, j *falconv1.Job) error {
	return b.exec.Start(ctx, Spec{
		ExpID: j.GetExpId(), JobID: j.GetId(), ArtifactID: j.GetArtifactId(), Role: j.GetRole(),
		Command: j.GetTaskSpec().GetCommand(), Replica: placement.Ranks(j.GetTaskSpec()), Slices: placement.Slices(j.GetTaskSpec()),
		Envs: j.GetTaskSpec().GetEnvs(), Config: j.GetConfig(),
	})
}

// Observe maps the executor's view to the resource manager's phases.
func (b *Backend) Observe(ctx context.Context, _ *falconv1.Cluster, j *falconv1.Job) (resourcemanager.Observation, error) {
	st, err := b.exec.Status(ctx, j.GetId())
	if err != nil {
		return resourcemanager.Observation{}, err
	}
	switch st.Phase {
	case PhaseRunning:
		return resourcemanager.Observation{Phase: resourcemanager.PhaseRunning, Message: st.Message}, nil
	case PhaseSucceeded:
		return resourcemanager.Observation{Phase: resourcemanager.PhaseSucceeded, Message: st.Message, At: st.EndedAt}, nil
	case PhaseFailed:
		return resourcemanager.Observation{Phase: resourcemanager.PhaseFailed, Message: st.Message, At: st.EndedAt}, nil
	default:
		return resourcemanager.Observation{Phase: resourcemanager.PhaseUnknown,
			Message: fmt.Sprintf("this machine has no record of job %s (was the data dir removed?)", j.GetId())}, nil
	}
}

// Stop kills every process group of the job.
func (b *Backend) Stop(ctx context.Context, _ *falconv1.Cluster, j *falconv1.Job) error {
	return b.exec.Kill(ctx, j.GetId())
}
