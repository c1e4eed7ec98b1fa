package resourcemanager

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/controller/watch"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/metrics"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// Phase is what a backend observes of a dispatched job.
type Phase string

const (
	// PhasePending: submitted, but not every replica runs yet (scheduling,
	// pulling images, waiting for nodes). The job keeps its queue slot.
	PhasePending   Phase = "Pending"
	PhaseRunning   Phase = "Running"
	PhaseSucceeded Phase = "Succeeded"
	PhaseFailed    Phase = "Failed"
	// PhaseUnknown: the backend has no trace of the job (its processes or
	// pods vanished, or it was never created because a dispatch was cut
	// short by a crash).
	PhaseUnknown Phase = "Unknown"
)

// Observation is a backend's view of one job.
type Observation struct {
	Phase   Phase
	Message string
	// At is when the job reached Phase as the backend saw it: for Running,
	// when its last replica started; for Succeeded and Failed, when it
	// ended (a Job's completion, a container's or a process's exit). Zero
	// when the backend cannot tell. A controller that was down sees a
	// change late, and the job's started_at and finished_at must still say
	// when it happened.
	At time.Time
	// Began, for Succeeded, is when the job began to run (its last
	// replica's start), zero when the backend cannot tell: a job first
	// seen ended, having run while no controller watched, still records
	// its start.
	Began time.Time
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

// Starter is a Backend whose Dispatch starts the job's processes itself
// (the local machine) rather than handing the job to a cluster that starts
// them. A controller killed mid-start leaves such a job half started, and
// a half-started job fails (the backend cannot tell how it would have
// gone), so the manager starts one job at a time on it: a kill cuts short
// at most the one it was starting.
type Starter interface {
	Backend
	StartsProcesses()
}

// Health is what a backend knows of its connection to one cluster.
type Health struct {
	// Err is the latest failure to reach the cluster (its API server
	// refused, timed out or could not be dialled); nil while it answers.
	Err error
	// Backoff reports that the backend is waiting before it tries the
	// cluster again: until then every call would fail, or hang until its
	// time limit, so the manager makes none that cycle.
	Backoff bool
}

// HealthReporter is a Backend that tracks whether it can reach each cluster
// (kubernetes, gke). Asking costs no call to the cluster.
type HealthReporter interface {
	Health(cluster *falconv1.Cluster) Health
}

// Sweeper is a Backend that can say, from its cache, which jobs have
// objects on a cluster. The manager removes those of jobs that ended (see
// planLeftover): a controller killed between a job's outcome and its
// cleanup, or an abort forced while the cluster could not be asked, leaves
// them, and only a level-triggered sweep can find them again, since the
// manager reads live jobs only.
type Sweeper interface {
	Residents(cluster *falconv1.Cluster) ([]Resident, error)
}

// Resident is one job's objects on a cluster.
type Resident struct {
	JobID string
	// Active: some of it has not finished (a Kubernetes Job with no
	// Complete or Failed condition), so it may still hold accelerators.
	Active bool
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
	mem      *memory
	snap     *snapshot
	// waiting is queuePositions' buffer for a queue's positions, reused
	// from queue to queue and cycle to cycle (cycles never overlap): not
	// memory, it holds nothing the next use reads.
	waiting []queue.Position
	// follower reports what changed; nil until Run starts it, so a bare
	// Reconcile reads every live job.
	follower    *watch.Follower
	resyncEvery time.Duration
	// writer names this manager on its status writes (falconv1.WriterKey),
	// so its follower skips their echoes: every such write folds the row
	// it returns into the snapshot, and one that failed is read again
	// (unsure). Unique per manager, so a standby replica's writes are
	// news to the leader.
	writer string
	// sub carries submissions out of the cycle; nil until Run starts it,
	// so a bare Reconcile submits within the cycle.
	sub *submitter
	// closing is set for the last cycle of a drain (finish): it picks no
	// job, so it hands no submission over.
	closing bool
	// deck hands a slot over the moment its holder releases it; it hands
	// nothing over until Run opens it, as sub (see deck).
	deck *deck
	// ends records a Running job's success the moment its backend
	// reports it; it records nothing until Run opens it (see ends).
	ends *ends

	// What backends reported since the last cycle (Touch, Wake).
	touchMu  sync.Mutex
	touched  map[string]bool
	touchAll bool

	draining chan struct{} // closed by Shutdown
	stopOnce sync.Once
	stopped  chan struct{} // closed when Run returns

	poolTiming PoolTiming
	retry      Retry // WithRetry
	noReuse    bool
	linger     time.Duration // WithPoolLinger
	poolCap    int           // WithPoolCap; 0: none

	metrics *metrics.RM
	// gauged keeps the gauges rebuilt every cycle (gauges) to the
	// series of the last cycle, without the gap a Reset leaves.
	gauged struct{ waiting, acquiring, unreachable, pools *metrics.GaugeSet }
	// lastOK is when a cycle last read the API server successfully.
	lastOK atomic.Int64 // Unix nanoseconds
}

// Option configures a Manager.
type Option func(*Manager)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(m *Manager) { m.log = l } }

// WithClock injects the clock used for timeouts.
func WithClock(now func() time.Time) Option { return func(m *Manager) { m.now = now } }

// WithMetrics records the manager's metrics on m (default: a private
// registry nobody reads).
func WithMetrics(rm *metrics.RM) Option { return func(m *Manager) { m.metrics = rm } }

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

		poolTiming: DefaultPoolTiming,
		retry:      DefaultRetry,

		snap:        newSnapshot(),
		resyncEvery: 30 * time.Second,
		touched:     map[string]bool{},
		draining:    make(chan struct{}),
		stopped:     make(chan struct{}),
	}
	for _, o := range opts {
		o(m)
	}
	if m.metrics == nil {
		m.metrics = metrics.NewRM(prometheus.NewRegistry())
	}
	m.gauged.waiting = metrics.NewGaugeSet(m.metrics.QueueWaiting)
	m.gauged.acquiring = metrics.NewGaugeSet(m.metrics.QueueAcquiring)
	m.gauged.unreachable = metrics.NewGaugeSet(m.metrics.ClusterUnreachable)
	m.gauged.pools = metrics.NewGaugeSet(m.metrics.NodePools)
	m.mem = newMemory(m.now)
	m.deck = newDeck(func(n int) { m.metrics.HandoversWaiting.Set(float64(n)) })
	m.ends = newEnds(m)
	m.writer = "resourcemanager-" + rand.Text()
	return m
}

// WithResync sets how often every live job is read again although the
// change feed reported nothing (default 30s): the safety net for writes
// made through another API server replica, which this one's feed does not
// carry.
func WithResync(d time.Duration) Option { return func(m *Manager) { m.resyncEvery = d } }

// Touch asks for a cycle now that looks at these jobs: a backend saw their
// processes or pods change.
func (m *Manager) Touch(jobIDs ...string) {
	m.deck.touched(jobIDs, m.now(), m.released, m.startNext)
	// The Running jobs ends looks at reach the cycle when it is done.
	jobIDs = m.ends.touched(jobIDs)
	if len(jobIDs) == 0 {
		return
	}
	m.touchMu.Lock()
	for _, id := range jobIDs {
		m.touched[id] = true
	}
	m.touchMu.Unlock()
	m.poke()
}

// Wake asks for a cycle now that looks at every live job: a backend saw
// something change and cannot say which job it concerns.
func (m *Manager) Wake() {
	m.touchMu.Lock()
	m.touchAll = true
	m.touchMu.Unlock()
	m.poke()
}

func (m *Manager) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Ready reports whether the manager has completed a cycle within maxAge:
// the readiness probe of a controller.
func (m *Manager) Ready(maxAge time.Duration) error {
	last := m.lastOK.Load()
	if last == 0 {
		return errors.New("no reconcile cycle has completed yet")
	}
	if age := time.Since(time.Unix(0, last)); age > maxAge {
		return fmt.Errorf("the last successful reconcile cycle was %s ago", age.Round(time.Second))
	}
	return nil
}

// Run reconciles until ctx is done: on every change the API server reports,
// whenever a backend calls Wake, at the next job timeout, and every interval.
func (m *Manager) Run(ctx context.Context) error {
	defer close(m.stopped)
	ctx = metadata.AppendToOutgoingContext(ctx, falconv1.WriterKey, m.writer)
	m.follower = watch.Follow(ctx, m.jobs, m.log, watch.Skip(m.writer))
	m.follower.WaitConnected(ctx)
	m.sub = newSubmitter(m.Touch)
	// Submissions in flight finish (or see ctx end) before Run returns, so
	// a stopped manager leaves no create behind it; the deck starts none
	// after it is closed.
	defer m.sub.wait()
	m.deck.open(ctx)
	defer m.deck.close()
	m.ends.open(ctx)
	defer m.ends.close()
	changes := m.follower.Wake()
	for {
		select {
		case <-m.draining:
			return m.finish(ctx)
		default:
		}
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
		case <-m.draining:
			t.Stop()
			return m.finish(ctx)
		case <-changes:
		case <-m.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// finish completes the reconciliation in flight when Shutdown drains Run:
// it waits for the submissions handed over (submitter) and, if any
// returned, runs one last cycle that records their outcomes and picks
// nothing new, so a drained manager leaves no job Dispatching whose create
// has already landed.
func (m *Manager) finish(ctx context.Context) error {
	m.deck.close()
	m.ends.close()
	m.sub.wait()
	ids := m.sub.returned()
	if len(ids) == 0 {
		return nil
	}
	m.Touch(ids...)
	m.closing = true
	if _, err := m.Reconcile(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("resource manager's last cycle failed", "err", err)
	}
	return nil
}

// Shutdown drains Run (000 Phase 2: graceful shutdown): no cycle starts
// after it is called, and it returns once the cycle in flight has finished
// its writes and Run has returned, or with ctx's error when ctx ends first.
// It cancels nothing itself: the cycle runs on Run's context, which the
// caller cancels when the drain's time is up.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.stopOnce.Do(func() { close(m.draining) })
	select {
	case <-m.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pool is one node pool a PoolBackend created on a cluster.
type Pool struct {
	Name            string
	AcceleratorType string // canonical name
	Topology        string
	Nodes           int64
	State           lifecycle.PoolState
	Status          string // the provider's own word for it (RUNNING, ...)
	SupplyMode      string
	CreatedFor      string // the job it was created for
	CreatedAt       time.Time
}

// Provisioning is how a job's own pool was requested.
type Provisioning struct {
	Pool    string
	Reason  lifecycle.Reason // Provisioning or ProvisioningFallback
	Message string
}

// PoolCheck is one look at a pool being provisioned.
type PoolCheck struct {
	Ready bool
	// Message, when set, is how far the pool is (a multi-slice job's
	// group: how many slice pools run); the job shows it while it waits.
	Message string
}

// PoolError is a pool failure that ends the job with Reason (NodePoolFailed,
// NodePoolTimeout); any other error from a PoolBackend is retried.
type PoolError struct {
	Reason  lifecycle.Reason
	Message string
}

func (e *PoolError) Error() string { return e.Message }

// PoolBackend is a Backend whose clusters give each job a node pool of its
// own (GKE): created on demand, handed to the next job of the same
// accelerator and topology when one waits, deleted otherwise. Which pool a
// job has is recorded on the job (node_pool), so ownership is always read
// from the jobs table and a restarted controller loses nothing.
type PoolBackend interface {
	Backend
	// NeedsPool reports whether the job gets a pool of its own; CPU-only
	// jobs run on the cluster's standing nodes.
	NeedsPool(job *falconv1.Job) bool
	// ProvisionPool starts creating the job's own pool (deterministically
	// named), or adopts it when it exists already. It does not wait.
	ProvisionPool(ctx context.Context, cluster *falconv1.Cluster, job *falconv1.Job) (Provisioning, error)
	// CheckPool looks once at a pool being provisioned: Ready once it can
	// take pods, a *PoolError when it never will. It may start work that
	// makes the pool whole (GKE: a group's members a restart left
	// uncreated), and never waits for it.
	CheckPool(ctx context.Context, cluster *falconv1.Cluster, pool string) (PoolCheck, error)
	// ListPools lists the pools the backend created on the cluster.
	ListPools(ctx context.Context, cluster *falconv1.Cluster) ([]Pool, error)
	// DeletePool starts deleting a pool; a missing pool is not an error,
	// and ErrPoolBusy means another operation runs on it (try later).
	DeletePool(ctx context.Context, cluster *falconv1.Cluster, pool string) error
	// Reservation reports the cluster's default reservation; nil when it
	// has none.
	Reservation(ctx context.Context, cluster *falconv1.Cluster) (*falconv1.ReservationCapacity, error)
}

// RetryableError is a dispatch failure that may pass by itself: the
// cluster was unreachable or overloaded, or refused a credential its client
// is about to refresh. The manager keeps the job Dispatching and tries again
// with backoff, for Retry.Dispatch's window, before failing it with
// JobSubmitFailed. Any other dispatch error (the cluster refused the Job as
// invalid or forbidden) fails the job at once: retrying cannot fix it.
type RetryableError struct{ Err error }

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// Retryable marks err as a RetryableError; nil stays nil.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &RetryableError{Err: err}
}

// UnusableError is a failure to build any connection to a cluster: its
// kubeconfig is missing or invalid, its context does not exist. No call can
// have reached the cluster, so a dispatch that fails this way created
// nothing there, and retrying cannot help until an operator fixes the
// cluster's registration: the job fails at once, saying so.
type UnusableError struct{ Err error }

func (e *UnusableError) Error() string { return e.Err.Error() }
func (e *UnusableError) Unwrap() error { return e.Err }

// RetryPolicy is how the manager tries again an action that a cluster
// keeps failing: after Initial, then at intervals doubling up to Max, for
// Window from the first failure; then it gives up, as the action says
// (Retry).
type RetryPolicy struct{ Initial, Max, Window time.Duration }

// Retry is how the manager retries what clusters fail (000 Phase 2: retries
// with a configurable backoff):
//   - Dispatch: a job's submission that failed in a way that may pass
//     (RetryableError). The job stays Dispatching, its Message naming the
//     error and when it is tried again; after the window it fails with
//     JobSubmitFailed.
//   - Stop: stopping a job that is aborted or failed, while its cluster
//     refuses or does not answer. After the window the outcome is recorded
//     anyway, saying the cluster never confirmed the stop, and the stop
//     goes on being asked, with longer gaps, until the cluster confirms it
//     (leftovers).
//
// A cluster whose backend is backing off is not asked meanwhile: its
// turns are not counted, and the window still runs.
type Retry struct{ Dispatch, Stop RetryPolicy }

// DefaultRetry is the manager's Retry when none is given.
var DefaultRetry = Retry{
	Dispatch: RetryPolicy{Initial: time.Second, Max: 30 * time.Second, Window: 5 * time.Minute},
	Stop:     RetryPolicy{Initial: time.Second, Max: 30 * time.Second, Window: 5 * time.Minute},
}

// WithRetry sets how the manager retries dispatches and stops (default
// DefaultRetry); a zero policy keeps its default.
func WithRetry(r Retry) Option {
	return func(m *Manager) {
		if r.Dispatch != (RetryPolicy{}) {
			m.retry.Dispatch = r.Dispatch
		}
		if r.Stop != (RetryPolicy{}) {
			m.retry.Stop = r.Stop
		}
	}
}

// ErrPoolBusy is what DeletePool wraps when the pool cannot be deleted yet.
var ErrPoolBusy = errors.New("node pool busy")
