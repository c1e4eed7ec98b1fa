package xpk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os/exec"
	"strconv"
	"strings"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/placement"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/xpk"
)

// BackendName is the value of a cluster's backend field for this backend.
const BackendName = "xpk"

// Workloads is what the backend needs of xpk (xpk.Manager).
type Workloads interface {
	Submit(ctx context.Context, c xpk.Cluster, s xpk.WorkloadSpec) (xpk.WorkloadHandle, error)
	Status(ctx context.Context, c xpk.Cluster, h xpk.WorkloadHandle) (xpk.WorkloadStatus, error)
	Cancel(ctx context.Context, c xpk.Cluster, h xpk.WorkloadHandle) (bool, error)
}

// Backend drives jobs on xpk clusters.
type Backend struct {
	xpk   Workloads
	creds xpk.Credentials
	log   *slog.Logger
}

var _ resourcemanager.Backend = (*Backend)(nil)

// Option configures a Backend.
type Option func(*Backend)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(b *Backend) { b.log = l } }

// New returns a Backend running w with each cluster's credentials from creds.
func New(w Workloads, creds xpk.Credentials, opts ...Option) *Backend {
	b := &Backend{xpk: w, creds: creds, log: slog.Default()}
	for _, o := range opts {
		o(b)
	}
	return b
}

// WorkloadName is the job's workload (xpk.WorkloadName).
func WorkloadName(jobID string) string { return xpk.WorkloadName(jobID) }

func (b *Backend) cluster(ctx context.Context, c *falconv1.Cluster) (xpk.Cluster, error) {
	xc := xpk.FromAPI(c)
	if b.creds != nil {
		env, err := b.creds.Env(ctx, xc)
		if err != nil {
			return xc, resourcemanager.Retryable(err)
		}
		xc.Env = env
	}
	return xc, nil
}

func handle(j *falconv1.Job, c *falconv1.Cluster) xpk.WorkloadHandle {
	return xpk.WorkloadHandle{WorkloadName: WorkloadName(j.GetId()), Cluster: c.GetName(), Namespace: c.GetNamespace()}
}

// Dispatch creates the job's workload unless it exists.
func (b *Backend) Dispatch(ctx context.Context, c *falconv1.Cluster, j *falconv1.Job) error {
	spec, err := Spec(c, j)
	if err != nil {
		return err
	}
	xc, err := b.cluster(ctx, c)
	if err != nil {
		return err
	}
	switch _, err := b.xpk.Status(ctx, xc, handle(j, c)); {
	case err == nil:
		return nil // created by an earlier attempt
	case !errors.As(err, new(*xpk.WorkloadNotFoundError)):
		return classify(err)
	}
	_, err = b.xpk.Submit(ctx, xc, spec)
	var se *xpk.WorkloadSubmitError
	if errors.As(err, &se) && strings.Contains(se.Stderr, "already exists") {
		return nil // a create raced ours (another controller term)
	}
	return classify(err)
}

// classify tells the resource manager which failures may pass: a cluster
// that did not answer in time or whose list could not be read is retried;
// an xpk that cannot be run is unusable until the registration is fixed;
// a create xpk refused is final.
func classify(err error) error {
	var ue *xpk.ClusterUnreachableError
	var oe *xpk.OutputError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ue) && ue.Err != nil && (errors.Is(ue.Err, exec.ErrNotFound) || errors.Is(ue.Err, fs.ErrNotExist) || errors.Is(ue.Err, fs.ErrPermission)):
		return &resourcemanager.UnusableError{Err: err}
	case errors.As(err, &ue), errors.As(err, &oe):
		return resourcemanager.Retryable(err)
	}
	return err
}

// Observe reads the workload's state from xpk workload list.
func (b *Backend) Observe(ctx context.Context, c *falconv1.Cluster, j *falconv1.Job) (resourcemanager.Observation, error) {
	xc, err := b.cluster(ctx, c)
	if err != nil {
		return resourcemanager.Observation{}, err
	}
	name := WorkloadName(j.GetId())
	st, err := b.xpk.Status(ctx, xc, handle(j, c))
	if errors.As(err, new(*xpk.WorkloadNotFoundError)) {
		return resourcemanager.Observation{Phase: resourcemanager.PhaseUnknown,
			Message: fmt.Sprintf("xpk workload %s is not listed on cluster %s (deleted outside Falcon?)", name, c.GetName())}, nil
	}
	if err != nil {
		return resourcemanager.Observation{}, err
	}
	return Observe(name, st), nil
}

// Observe maps a workload's status to the job's phase (see the package
// doc); it is pure, so each rule is table-tested.
func Observe(name string, st xpk.WorkloadStatus) resourcemanager.Observation {
	say := func(what string) string {
		msg := fmt.Sprintf("xpk workload %s %s", name, what)
		if m := strings.TrimSpace(st.Message); m != "" {
			msg += ": " + m
		}
		return msg
	}
	switch st.State {
	case xpk.StateQueued:
		return resourcemanager.Observation{Phase: resourcemanager.PhasePending, Message: say("is queued")}
	case xpk.StateRunning:
		return resourcemanager.Observation{Phase: resourcemanager.PhaseRunning, Message: say("is running")}
	case xpk.StateCompleted:
		return resourcemanager.Observation{Phase: resourcemanager.PhaseSucceeded, Message: say("completed"), At: endOf(st)}
	case xpk.StateFailed:
		return resourcemanager.Observation{Phase: resourcemanager.PhaseFailed, Message: say("failed"), At: endOf(st)}
	}
	if st.Status == "PodsReady" {
		return resourcemanager.Observation{Phase: resourcemanager.PhaseRunning, Message: say("is running")}
	}
	return resourcemanager.Observation{Phase: resourcemanager.PhasePending, Message: say("has status " + strconv.Quote(st.Status))}
}

// endOf is when a finished workload ended: its table's Status Time (zero
// when the table leaves it blank).
func endOf(st xpk.WorkloadStatus) time.Time {
	if st.EndTime == nil {
		return time.Time{}
	}
	return *st.EndTime
}

// Stop deletes the job's workload; one that is already gone is a warning.
func (b *Backend) Stop(ctx context.Context, c *falconv1.Cluster, j *falconv1.Job) error {
	xc, err := b.cluster(ctx, c)
	if err != nil {
		return err
	}
	_, err = b.xpk.Cancel(ctx, xc, handle(j, c))
	var nf *xpk.WorkloadNotFoundError
	if errors.As(err, &nf) {
		b.log.Warn("stopping a job whose xpk workload is gone", "job", j.GetId(), "cluster", c.GetName(), "workload", nf.Workload)
		return nil
	}
	return err
}

// maxConfigEnv is the largest experiment config passed as
// CUSTOM_CONFIG_KEY on xpk's command line: one argument may be at most
// 128 KiB on Linux, and the command carries every other flag too.
const maxConfigEnv = 32 << 10

// Spec is the workload of a job on cluster c: the task's image and
// command, xpk's name for its slice (--tpu-type or --device-type as the
// cluster's slot for the type says, else the type's kind), its priority
// (negative low, 0 medium, positive high), the task's env and Falcon's own,
// and the cluster's extra args.
func Spec(c *falconv1.Cluster, j *falconv1.Job) (xpk.WorkloadSpec, error) {
	ts := j.GetTaskSpec()
	if ts.GetImage() == "" {
		return xpk.WorkloadSpec{}, errors.New("an xpk workload needs the task's image (--docker-image)")
	}
	replica := int(ts.GetReplica())
	if replica == 0 {
		replica = int(j.GetReplica())
	}
	sl, err := accelerator.Resolve(ts.GetDeviceType(), ts.GetDeviceTopo(), replica, int(ts.GetDeviceCount()))
	if err != nil {
		return xpk.WorkloadSpec{}, err
	}
	typ, class, err := xpk.TypeFor(sl)
	if err != nil {
		return xpk.WorkloadSpec{}, err
	}
	for _, s := range c.GetAccelerators() {
		if s.GetType() == sl.Spec.Name && s.GetDeviceClass() != "" {
			class = s.GetDeviceClass()
		}
	}
	prio := "medium"
	switch p := j.GetPriority(); {
	case p < 0:
		prio = "low"
	case p > 0:
		prio = "high"
	}
	env := maps.Clone(ts.GetEnvs())
	if env == nil {
		env = map[string]string{}
	}
	env["FALCON_EXP_ID"], env["FALCON_JOB_ID"], env["FALCON_ROLE"] = j.GetExpId(), j.GetId(), j.GetRole()
	// xpk's JobSet gives each slice's pods the MEGASCALE_* variables itself
	// (--num-slices); the world is every host of every slice.
	slices := placement.Slices(ts)
	env["FALCON_WORLD_SIZE"] = strconv.Itoa(sl.Hosts * slices)
	if cfg := j.GetConfig(); cfg != "" && len(cfg) <= maxConfigEnv {
		env["CUSTOM_CONFIG_KEY"] = cfg
	}
	s := xpk.WorkloadSpec{
		Name: WorkloadName(j.GetId()), DockerImage: ts.GetImage(), Command: []string{ts.GetCommand()},
		AcceleratorType: typ, DeviceClass: class, Priority: prio, Env: env,
		ExtraArgs: c.GetExtraArgs(),
	}
	if class == xpk.ClassGPU {
		s.NumNodes = sl.Hosts
	}
	s.NumSlices = slices
	return s, nil
}
