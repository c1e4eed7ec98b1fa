package resourcemanager

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/controller/watch"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

// Phase is what a backend observes of a dispatched job.
type Phase string

const (
	PhaseRunning   Phase = "Running"
	PhaseSucceeded Phase = "Succeeded"
	PhaseFailed    Phase = "Failed"
	// PhaseUnknown: the backend has no trace of the job (its processes or
	// pods vanished). The manager fails the job rather than wait forever.
	PhaseUnknown Phase = "Unknown"
)

// Observation is a backend's view of one job.
type Observation struct {
	Phase   Phase
	Message string
}

// Backend runs jobs on one kind of cluster. Every method is idempotent and
// keyed by the job's ID, which is what makes the manager crash-safe.
type Backend interface {
	// Dispatch starts the job; if it already exists, it does nothing.
	Dispatch(ctx context.Context, cluster *falconv1.Cluster, job *falconv1.Job) error
	// Observe reports the job's phase.
	Observe(ctx context.Context, cluster *falconv1.Cluster, job *falconv1.Job) (Observation, error)
	// Stop kills the job and everything it started; a missing job is not an error.
	Stop(ctx context.Context, cluster *falconv1.Cluster, job *falconv1.Job) error
}

// Manager is the resource manager's control loop.
type Manager struct {
	jobs     falconv1.JobServiceClient
	clusters falconv1.ClusterServiceClient
	backends map[string]Backend
	log      *slog.Logger
	now      func() time.Time
	interval time.Duration
	wake     chan struct{}
}

// Option configures a Manager.
type Option func(*Manager)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(m *Manager) { m.log = l } }

// WithClock injects the clock used for timeouts.
func WithClock(now func() time.Time) Option { return func(m *Manager) { m.now = now } }

// WithInterval sets the safety-net poll interval (default 5s).
func WithInterval(d time.Duration) Option { return func(m *Manager) { m.interval = d } }

// WithBackend registers the backend for clusters whose backend field is name.
func WithBackend(name string, b Backend) Option { return func(m *Manager) { m.backends[name] = b } }

// New returns a Manager talking to the API server over conn.
func New(conn grpc.ClientConnInterface, opts ...Option) *Manager {
	m := &Manager{
		jobs:     falconv1.NewJobServiceClient(conn),
		clusters: falconv1.NewClusterServiceClient(conn),
		backends: map[string]Backend{},
		log:      slog.Default(),
		now:      time.Now,
		interval: 5 * time.Second,
		wake:     make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Wake asks for a cycle now; backends call it when a job's processes exit.
func (m *Manager) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run reconciles until ctx is done: on every change the API server reports,
// whenever a backend calls Wake, at the next job timeout, and every interval.
func (m *Manager) Run(ctx context.Context) error {
	changes := watch.Changes(ctx, m.jobs, m.log)
	for {
		next, err := m.Reconcile(ctx)
		if err != nil && ctx.Err() == nil {
			m.log.Warn("resource manager cycle failed", "err", err)
		}
		wait := m.interval
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(m.now()), 0))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-changes:
		case <-m.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// Reconcile runs one cycle and returns the earliest upcoming timeout (zero
// if none), so Run can wake exactly then:
//  1. read the registered clusters;
//  2. list every Pending, Running and Aborting job, oldest first;
//  3. Aborting: stop it on its cluster, then mark it Aborted;
//  4. Pending: choose a cluster (the pinned one, or the first active
//     cluster offering the job's device type), mark it Dispatching, dispatch
//     it, mark it Running — or Failed/JobSubmitFailed if the cluster refuses;
//  5. Running: fail it with Reason Timeout once timeout_seconds have passed
//     since it started (stopping it first); otherwise observe it and record
//     success, failure (Reason JobFailed) or vanished processes.
func (m *Manager) Reconcile(ctx context.Context) (time.Time, error) {
	cl, err := m.clusters.ListClusters(ctx, &falconv1.ListClustersRequest{})
	if err != nil {
		return time.Time{}, err
	}
	clusters := cl.GetItems()
	jobs, err := m.liveJobs(ctx)
	if err != nil {
		return time.Time{}, err
	}
	var next time.Time
	for _, j := range jobs {
		if ctx.Err() != nil {
			return next, ctx.Err()
		}
		var d time.Time
		switch lifecycle.Status(j.GetStatus()) {
		case lifecycle.Aborting:
			m.abort(ctx, clusters, j)
		case lifecycle.Pending:
			m.dispatch(ctx, clusters, j)
		case lifecycle.Running:
			d = m.observe(ctx, clusters, j)
		}
		if !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	return next, nil
}

func (m *Manager) liveJobs(ctx context.Context) ([]*falconv1.Job, error) {
	var out []*falconv1.Job
	token := ""
	for {
		resp, err := m.jobs.ListJobs(ctx, &falconv1.ListJobsRequest{
			Statuses:  []string{string(lifecycle.Pending), string(lifecycle.Running), string(lifecycle.Aborting)},
			PageSize:  1000,
			PageToken: token,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, resp.GetItems()...)
		if token = resp.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

func findCluster(clusters []*falconv1.Cluster, name string) *falconv1.Cluster {
	for _, c := range clusters {
		if c.GetName() == name {
			return c
		}
	}
	return nil
}

func (m *Manager) backendFor(c *falconv1.Cluster) (Backend, error) {
	if c == nil {
		return nil, fmt.Errorf("cluster is not registered")
	}
	b, ok := m.backends[c.GetBackend()]
	if !ok {
		return nil, fmt.Errorf("cluster %s uses backend %q, which this controller does not run", c.GetName(), c.GetBackend())
	}
	return b, nil
}

// update writes a status change conditional on the status the job had when
// read. Losing that race (FailedPrecondition) is normal — usually a user's
// abort — and is left to the next cycle.
func (m *Manager) update(ctx context.Context, j *falconv1.Job, to lifecycle.Status, reason lifecycle.Reason, msg, cluster string) bool {
	if j.GetStatus() == string(to) && j.GetReason() == string(reason) && j.GetMessage() == msg && (cluster == "" || cluster == j.GetClusterName()) {
		return true
	}
	updated, err := m.jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{
		Id: j.GetId(), ExpectedStatus: j.GetStatus(), Status: string(to),
		Reason: string(reason), Message: msg, ClusterName: cluster,
	})
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition {
			m.log.Debug("job changed under us; next cycle will see it", "job", j.GetId(), "err", err)
		} else {
			m.log.Warn("update job status", "job", j.GetId(), "to", to, "err", err)
		}
		return false
	}
	proto.Reset(j)
	proto.Merge(j, updated)
	return true
}

func (m *Manager) abort(ctx context.Context, clusters []*falconv1.Cluster, j *falconv1.Job) {
	if name := j.GetClusterName(); name != "" {
		c := findCluster(clusters, name)
		if b, err := m.backendFor(c); err == nil {
			if err := b.Stop(ctx, c, j); err != nil {
				m.log.Warn("stop job", "job", j.GetId(), "cluster", name, "err", err)
				return // retry next cycle; the job stays Aborting
			}
		}
	}
	msg := j.GetMessage()
	if msg == "" {
		msg = "aborted"
	}
	reason := ""
	if j.GetReason() == string(lifecycle.ReasonSiblingFailed) {
		reason = j.GetReason()
	}
	if m.update(ctx, j, lifecycle.Aborted, lifecycle.Reason(reason), msg, "") {
		m.log.Info("job aborted", "job", j.GetId(), "exp", j.GetExpId())
	}
}

func (m *Manager) pickCluster(clusters []*falconv1.Cluster, j *falconv1.Job) (*falconv1.Cluster, string) {
	if name := j.GetClusterName(); name != "" {
		c := findCluster(clusters, name)
		switch {
		case c == nil:
			return nil, fmt.Sprintf("cluster %s is not registered", name)
		case c.GetStatus() != store.ClusterActive:
			return nil, fmt.Sprintf("cluster %s is %s; waiting until it is active", name, c.GetStatus())
		}
		if _, err := m.backendFor(c); err != nil {
			return nil, err.Error()
		}
		return c, ""
	}
	dev := j.GetTaskSpec().GetDeviceType()
	for _, c := range clusters {
		if c.GetStatus() != store.ClusterActive {
			continue
		}
		if _, err := m.backendFor(c); err != nil {
			continue
		}
		// A cluster that lists no accelerator types takes any job (local).
		if len(c.GetAcceleratorTypes()) == 0 || slices.Contains(c.GetAcceleratorTypes(), dev) {
			return c, ""
		}
	}
	return nil, fmt.Sprintf("no active cluster offers device type %q", dev)
}

func (m *Manager) dispatch(ctx context.Context, clusters []*falconv1.Cluster, j *falconv1.Job) {
	c, why := m.pickCluster(clusters, j)
	if c == nil {
		m.update(ctx, j, lifecycle.Pending, lifecycle.ReasonWaiting, why, "")
		return
	}
	b, _ := m.backendFor(c)
	if !m.update(ctx, j, lifecycle.Pending, lifecycle.ReasonDispatching, "submitting to cluster "+c.GetName(), c.GetName()) {
		return
	}
	// The executor needs the experiment's config, which GetJob carries.
	full, err := m.jobs.GetJob(ctx, &falconv1.GetJobRequest{Id: j.GetId()})
	if err != nil {
		m.log.Warn("get job", "job", j.GetId(), "err", err)
		return
	}
	if full.GetStatus() != string(lifecycle.Pending) {
		return // aborted meanwhile; the next cycle stops it
	}
	if err := b.Dispatch(ctx, c, full); err != nil {
		m.log.Warn("dispatch failed", "job", j.GetId(), "cluster", c.GetName(), "err", err)
		m.update(ctx, full, lifecycle.Failed, lifecycle.ReasonJobSubmitFailed, "submit to cluster "+c.GetName()+" failed: "+err.Error(), "")
		return
	}
	obs, err := b.Observe(ctx, c, full)
	msg := "dispatched to " + c.GetName()
	if err == nil && obs.Message != "" {
		msg = obs.Message
	}
	if m.update(ctx, full, lifecycle.Running, "", msg, "") {
		m.log.Info("job running", "job", j.GetId(), "exp", j.GetExpId(), "cluster", c.GetName())
	}
}

func (m *Manager) observe(ctx context.Context, clusters []*falconv1.Cluster, j *falconv1.Job) time.Time {
	c := findCluster(clusters, j.GetClusterName())
	b, err := m.backendFor(c)
	if err != nil {
		m.log.Warn("running job on unusable cluster", "job", j.GetId(), "cluster", j.GetClusterName(), "err", err)
		return time.Time{}
	}
	var deadline time.Time
	if t := j.GetTaskSpec().GetTimeoutSeconds(); t > 0 && j.GetStartedAt() != nil {
		deadline = j.GetStartedAt().AsTime().Add(time.Duration(t) * time.Second)
		if !m.now().Before(deadline) {
			if err := b.Stop(ctx, c, j); err != nil {
				m.log.Warn("stop timed-out job", "job", j.GetId(), "err", err)
				return deadline
			}
			m.update(ctx, j, lifecycle.Failed, lifecycle.ReasonTimeout, fmt.Sprintf("timed out after %ds; the job was stopped", t), "")
			return time.Time{}
		}
	}
	obs, err := b.Observe(ctx, c, j)
	if err != nil {
		m.log.Warn("observe job", "job", j.GetId(), "err", err)
		return deadline
	}
	switch obs.Phase {
	case PhaseSucceeded:
		m.update(ctx, j, lifecycle.Succeeded, "", obs.Message, "")
	case PhaseFailed:
		m.update(ctx, j, lifecycle.Failed, lifecycle.ReasonJobFailed, obs.Message, "")
	case PhaseUnknown:
		msg := obs.Message
		if msg == "" {
			msg = "the job's processes are gone and its outcome is unknown"
		}
		m.update(ctx, j, lifecycle.Failed, lifecycle.ReasonJobFailed, msg, "")
	default:
		m.update(ctx, j, lifecycle.Running, "", obs.Message, "")
		return deadline
	}
	return time.Time{}
}
