package gke

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	compute "google.golang.org/api/compute/v1"
	container "google.golang.org/api/container/v1"

	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/lifecycle"
)

// SupplyMode is how a pool gets its VMs.
type SupplyMode string

const (
	// SupplyAuto decides per pool: the reservation if it has room, else flex-start.
	SupplyAuto        SupplyMode = ""
	SupplyReservation SupplyMode = "reservation"
	SupplyFlexStart   SupplyMode = "flex-start"
)

// Cluster is a GKE cluster as Falcon's cluster row describes it.
type Cluster struct {
	Project, Location, Name string
	// DefaultReservation is a zonal specific reservation: a bare name (in
	// Project, in the zone Location, or the pool's zone for a regional
	// cluster) or projects/P/zones/Z/reservations/R. Empty: none.
	DefaultReservation string
}

func (c Cluster) path() string {
	return "projects/" + c.Project + "/locations/" + c.Location + "/clusters/" + c.Name
}

func (c Cluster) poolPath(pool string) string { return c.path() + "/nodePools/" + pool }

// Request asks for the node pool of one job.
type Request struct {
	Cluster    Cluster
	JobID      string
	SupplyMode SupplyMode // the task's supply_mode; SupplyAuto decides
	Slice      accelerator.Slice
	// Slices above 1 asks for a pool group: one pool of Slice per slice.
	Slices int
}

// pool names the request's pool, or its group, in messages.
func (r Request) pool() string {
	if r.Slices > 1 {
		g, _ := GroupName(r.JobID)
		return fmt.Sprintf("group %s (%d slice pools)", g, r.Slices)
	}
	name, _ := PoolName(r.JobID)
	return name
}

// hosts is how many nodes the request needs in all.
func (r Request) hosts() int64 { return int64(r.Slice.Hosts) * int64(max(r.Slices, 1)) }

// Result is the pool a job got and how. Reason and Message are what the job
// shows while it waits for the pool.
type Result struct {
	Pool      string
	Mode      SupplyMode
	Reason    lifecycle.Reason // Provisioning or ProvisioningFallback
	Message   string
	Operation string    // the create operation; empty when adopted
	Adopted   bool      // the pool existed already (created before a restart)
	CreatedAt time.Time // when the pool was created, for Wait's deadline
}

// Clock is the time source; tests pass a fast one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

type options struct {
	clock                               Clock
	reservationScaleDown, flexScaleDown time.Duration
	provisionTimeout                    time.Duration
	pollInitial, pollMax                time.Duration
	workloadPolicy                      func(accelerator.Slice) string
}

// Option configures a Manager.
type Option func(*options)

// WithClock replaces the real clock.
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithScaleDownUnneeded sets how long an idle pool keeps its nodes, by the
// supply mode actually used: short for a reservation (capacity comes back),
// long for flex-start (it may not). Defaults 10m and 6h.
func WithScaleDownUnneeded(reservation, flexStart time.Duration) Option {
	return func(o *options) { o.reservationScaleDown, o.flexScaleDown = reservation, flexStart }
}

// WithProvisionTimeout sets how long after creation a pool may take to reach
// RUNNING before the job fails with NodePoolTimeout (default 30m).
func WithProvisionTimeout(d time.Duration) Option { return func(o *options) { o.provisionTimeout = d } }

// WithPolling sets the first and the largest interval between polls
// (defaults 5s and 1m); intervals double in between.
func WithPolling(initial, max time.Duration) Option {
	return func(o *options) { o.pollInitial, o.pollMax = initial, max }
}

// WithWorkloadPolicy names the Compute workload policy of a slice that needs
// one (multi-host v7x); default DefaultWorkloadPolicy.
func WithWorkloadPolicy(f func(accelerator.Slice) string) Option {
	return func(o *options) { o.workloadPolicy = f }
}

// Manager creates, waits for, lists and deletes Falcon's node pools.
type Manager struct {
	container *container.Service
	compute   *compute.Service
	opts      options

	// refused holds the pool groups (cluster path + "/" + group) GKE
	// refused a member of: listed as failed, so the resource manager
	// deletes what was created rather than handing a group that cannot be
	// completed to the next job. A restart forgets them: the next job to
	// take such a group over gets GKE's refusal when its missing members
	// are created, which refills this, and the resource manager gives that
	// job a group of its own (a job fails on a refusal only of its own
	// pool).
	mu      sync.Mutex
	refused map[string]bool
}

// New returns a Manager using the given API clients (built with Application
// Default Credentials in production, fakegke's options in tests).
func New(containerSvc *container.Service, computeSvc *compute.Service, opts ...Option) *Manager {
	o := options{
		clock:                realClock{},
		reservationScaleDown: 10 * time.Minute,
		flexScaleDown:        6 * time.Hour,
		provisionTimeout:     30 * time.Minute,
		pollInitial:          5 * time.Second,
		pollMax:              time.Minute,
		workloadPolicy:       DefaultWorkloadPolicy,
	}
	for _, f := range opts {
		f(&o)
	}
	return &Manager{container: containerSvc, compute: computeSvc, opts: o}
}

// Ensure makes sure the job's pool exists or is being created, and says how.
// It is idempotent: a pool that already exists (created before a restart)
// is adopted, never created twice. Steps:
//  1. Get the job's pool; if it exists, adopt it.
//  2. Choose the supply mode: a forced one, or the default reservation if
//     count - inUseCount covers the hosts, else flex-start.
//  3. Create the pool; if a concurrent create won (409), adopt it.
//
// Errors are *PoolError with NodePoolFailed when the job cannot get a pool
// as asked (forced reservation without room, invalid request); others are
// API errors worth retrying.
func (m *Manager) Ensure(ctx context.Context, req Request) (Result, error) {
	if req.Slices > 1 {
		return m.ensureGroup(ctx, req)
	}
	name, err := PoolName(req.JobID)
	if err != nil {
		return Result{}, failed("", err.Error(), err)
	}
	if r, ok, err := m.adopt(ctx, req.Cluster, name); err != nil || ok {
		return r, err
	}

	mode, reason, msg, res, err := m.chooseMode(ctx, req)
	if err != nil {
		return Result{}, err
	}
	if req.Slice.NeedsPlacementPolicy() {
		if err := m.ensureWorkloadPolicy(ctx, req.Cluster, req.Slice, name); err != nil {
			return Result{}, err
		}
	}
	now := m.opts.clock.Now()
	spec := m.poolSpec(name, req.JobID, req.Slice, mode, res, now)
	var op *container.Operation
	err = m.retry(ctx, func() error {
		var err error
		op, err = m.container.Projects.Locations.Clusters.NodePools.Create(req.Cluster.path(), &container.CreateNodePoolRequest{NodePool: spec}).Context(ctx).Do()
		return err
	})
	switch {
	case isConflict(err):
		if r, ok, err := m.adopt(ctx, req.Cluster, name); err != nil || ok {
			return r, err
		}
		return Result{}, fmt.Errorf("create node pool %s: exists but cannot be read: %w", name, err)
	case err != nil && apiCode(err) >= 400 && apiCode(err) < 500 && !transient(err):
		return Result{}, failed(name, fmt.Sprintf("GKE refused to create node pool %s: %s", name, apiMessage(err)), err)
	case err != nil:
		return Result{}, fmt.Errorf("create node pool %s: %w", name, err)
	}
	return Result{Pool: name, Mode: mode, Reason: reason, Message: msg, Operation: op.Name, CreatedAt: now}, nil
}

// adopt returns the existing pool as a Result.
func (m *Manager) adopt(ctx context.Context, c Cluster, name string) (Result, bool, error) {
	np, err := m.getPool(ctx, c, name)
	if isNotFound(err) {
		return Result{}, false, nil
	}
	if err != nil {
		return Result{}, false, fmt.Errorf("get node pool %s: %w", name, err)
	}
	info := poolInfo(np)
	mode := info.Mode
	msg := fmt.Sprintf("adopted node pool %s (%s, status %s)", name, mode, np.Status)
	return Result{Pool: name, Mode: mode, Reason: lifecycle.ReasonProvisioning, Message: msg, Adopted: true, CreatedAt: info.CreatedAt}, true, nil
}

type reservationRef struct {
	path          string // projects/P/zones/Z/reservations/R
	project, zone string
	name          string
	affinityValue string // what reservationAffinity.values holds
}

// parseReservation resolves a cluster's default reservation.
func parseReservation(c Cluster) (*reservationRef, error) {
	v := c.DefaultReservation
	if rest, ok := strings.CutPrefix(v, "projects/"); ok {
		parts := strings.Split(rest, "/")
		if len(parts) != 5 || parts[1] != "zones" || parts[3] != "reservations" {
			return nil, fmt.Errorf("default_reservation %q: want a name or projects/P/zones/Z/reservations/R", v)
		}
		r := &reservationRef{path: v, project: parts[0], zone: parts[2], name: parts[4], affinityValue: parts[4]}
		if r.project != c.Project {
			r.affinityValue = "projects/" + r.project + "/reservations/" + r.name // a shared reservation
		}
		return r, nil
	}
	if strings.Count(c.Location, "-") < 2 {
		return nil, fmt.Errorf("default_reservation %q: cluster %s is regional; name the reservation's zone as projects/P/zones/Z/reservations/R", v, c.Name)
	}
	return &reservationRef{
		path:    "projects/" + c.Project + "/zones/" + c.Location + "/reservations/" + v,
		project: c.Project, zone: c.Location, name: v, affinityValue: v,
	}, nil
}

// chooseMode applies 000 section 5: the reservation when it has room for
// every host, flex-start otherwise; a forced mode wins.
func (m *Manager) chooseMode(ctx context.Context, req Request) (SupplyMode, lifecycle.Reason, string, *reservationRef, error) {
	hosts := req.hosts()
	name := req.pool()
	flex := func(reason lifecycle.Reason, why string) (SupplyMode, lifecycle.Reason, string, *reservationRef, error) {
		return SupplyFlexStart, reason, why, nil, nil
	}
	switch req.SupplyMode {
	case SupplyAuto, SupplyReservation, SupplyFlexStart:
	default:
		return "", "", "", nil, failed(name, fmt.Sprintf("unknown supply_mode %q: want reservation or flex-start", req.SupplyMode), nil)
	}
	if req.SupplyMode == SupplyFlexStart {
		return flex(lifecycle.ReasonProvisioning, "creating flex-start node pool "+name+" (supply_mode flex-start)")
	}
	if req.Cluster.DefaultReservation == "" {
		if req.SupplyMode == SupplyReservation {
			return "", "", "", nil, failed(name, fmt.Sprintf("supply_mode reservation, but cluster %s has no default_reservation", req.Cluster.Name), nil)
		}
		return flex(lifecycle.ReasonProvisioning, "creating flex-start node pool "+name+" (no reservation configured)")
	}
	ref, err := parseReservation(req.Cluster)
	if err != nil {
		return "", "", "", nil, failed(name, err.Error(), err)
	}
	res, err := m.readReservation(ctx, ref)
	var free int64
	short := ""
	switch {
	case isNotFound(err):
		short = fmt.Sprintf("reservation %s not found", ref.path)
	case err != nil:
		return "", "", "", nil, fmt.Errorf("read reservation %s: %w", ref.path, err)
	case res.SpecificReservation == nil:
		short = fmt.Sprintf("reservation %s is not a specific reservation", ref.path)
	default:
		free = res.SpecificReservation.Count - res.SpecificReservation.InUseCount
		if free < hosts {
			short = fmt.Sprintf("reservation %s has %d of %d nodes free, %d needed", ref.path, free, res.SpecificReservation.Count, hosts)
		}
	}
	if short == "" {
		return SupplyReservation, lifecycle.ReasonProvisioning,
			fmt.Sprintf("creating node pool %s from reservation %s (%d of %d nodes free, %d needed)", name, ref.path, free, res.SpecificReservation.Count, hosts),
			ref, nil
	}
	if req.SupplyMode == SupplyReservation {
		return "", "", "", nil, failed(name, "supply_mode reservation: "+short, err)
	}
	return flex(lifecycle.ReasonProvisioningFallback, "creating flex-start node pool "+name+": "+short)
}

// Check looks once at a pool being provisioned: true once it is RUNNING; a
// *PoolError with NodePoolFailed and GKE's message when the pool is in
// ERROR, with NodePoolTimeout when it is not RUNNING by its creation time
// (its created-at label) plus the provision timeout. Transient API errors
// are nil, false: look again later.
func (m *Manager) Check(ctx context.Context, c Cluster, pool string) (bool, error) {
	r, err := m.Look(ctx, c, pool)
	return r.Ready, err
}

// judge turns one read of a pool into ready, still waiting, or a failure.
func (m *Manager) judge(pool string, np *container.NodePool, err error, deadline time.Time) (bool, error) {
	status := "unknown"
	switch {
	case isNotFound(err):
		return false, failed(pool, fmt.Sprintf("node pool %s disappeared while provisioning", pool), err)
	case err != nil && !transient(err):
		return false, fmt.Errorf("poll node pool %s: %w", pool, err)
	case err == nil:
		status = np.Status
		switch np.Status {
		case "RUNNING", "RUNNING_WITH_ERROR":
			return true, nil
		case "ERROR":
			msg := np.StatusMessage
			for _, cond := range np.Conditions {
				if msg == "" {
					msg = cond.Message
				}
			}
			return false, failed(pool, fmt.Sprintf("node pool %s: %s", pool, msg), nil)
		case "STOPPING":
			return false, failed(pool, fmt.Sprintf("node pool %s is being deleted", pool), nil)
		}
	}
	if !m.opts.clock.Now().Before(deadline) {
		return false, &PoolError{Reason: lifecycle.ReasonNodePoolTimeout, Pool: pool,
			Message: fmt.Sprintf("node pool %s not RUNNING %s after creation (status %s)", pool, m.opts.provisionTimeout, status)}
	}
	return false, nil
}

// ErrBusy means GKE refused a delete because another operation (the
// create, or an earlier delete) is running on the pool: try again later.
var ErrBusy = errors.New("another operation is running on the node pool")

// StartDelete asks GKE to delete a pool without waiting for it to go. A
// missing pool is success; a pool busy with another operation is ErrBusy.
func (m *Manager) StartDelete(ctx context.Context, c Cluster, pool string) error {
	_, err := m.startDelete(ctx, c, pool)
	return err
}

// startDelete is StartDelete that also says whether the pool was there.
func (m *Manager) startDelete(ctx context.Context, c Cluster, pool string) (found bool, err error) {
	_, err = m.container.Projects.Locations.Clusters.NodePools.Delete(c.poolPath(pool)).Context(ctx).Do()
	switch {
	case err == nil:
		return true, nil
	case isNotFound(err):
		return false, nil
	case busy(err):
		return true, fmt.Errorf("delete node pool %s: %w (%s)", pool, ErrBusy, apiMessage(err))
	default:
		return true, fmt.Errorf("delete node pool %s: %s", pool, apiMessage(err))
	}
}

// PoolInfo is one Falcon pool as the orphan sweep and the capacity view see it.
type PoolInfo struct {
	Name        string
	JobID       string
	Status      string
	Mode        SupplyMode
	MachineType string
	Topology    string // placementPolicy.tpuTopology; empty for a v7x workload policy
	Nodes       int64
	CreatedAt   time.Time // zero if the label is missing
	Labels      map[string]string
}

// ListFalconPools lists the cluster's pools named falcon-* and labelled as
// Falcon's, sorted by name as GKE returns them.
func (m *Manager) ListFalconPools(ctx context.Context, c Cluster) ([]PoolInfo, error) {
	var resp *container.ListNodePoolsResponse
	err := m.retry(ctx, func() error {
		var err error
		resp, err = m.container.Projects.Locations.Clusters.NodePools.List(c.path()).Context(ctx).Do()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list node pools of %s: %w", c.Name, err)
	}
	var out []PoolInfo
	for _, np := range resp.NodePools {
		if !strings.HasPrefix(np.Name, PoolPrefix) || np.Config == nil || np.Config.Labels[LabelManagedBy] != ManagedBy {
			continue
		}
		out = append(out, poolInfo(np))
	}
	return out, nil
}

func poolInfo(np *container.NodePool) PoolInfo {
	info := PoolInfo{Name: np.Name, Status: np.Status, Nodes: np.InitialNodeCount}
	if cfg := np.Config; cfg != nil {
		info.MachineType = cfg.MachineType
		info.Labels = cfg.Labels
		info.JobID = cfg.Labels[LabelJobID]
		info.Mode = SupplyMode(cfg.Labels[LabelSupplyMode])
		if s, err := strconv.ParseInt(cfg.Labels[LabelCreatedAt], 10, 64); err == nil {
			info.CreatedAt = time.Unix(s, 0)
		}
	}
	if pp := np.PlacementPolicy; pp != nil {
		info.Topology = pp.TpuTopology
	}
	return info
}

func (m *Manager) getPool(ctx context.Context, c Cluster, name string) (*container.NodePool, error) {
	var np *container.NodePool
	err := m.retry(ctx, func() error {
		var err error
		np, err = m.container.Projects.Locations.Clusters.NodePools.Get(c.poolPath(name)).Context(ctx).Do()
		return err
	})
	return np, err
}

// retry runs call up to three times while it fails transiently, so one 503
// does not fail a reconcile step; longer outages surface to the caller.
func (m *Manager) retry(ctx context.Context, call func() error) error {
	interval := m.opts.pollInitial
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = call(); err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.opts.clock.After(interval):
		}
		interval = min(2*interval, m.opts.pollMax)
	}
	return err
}

// readReservation gets a reservation, riding out transient errors.
func (m *Manager) readReservation(ctx context.Context, ref *reservationRef) (*compute.Reservation, error) {
	var res *compute.Reservation
	err := m.retry(ctx, func() error {
		var err error
		res, err = m.compute.Reservations.Get(ref.project, ref.zone, ref.name).Context(ctx).Do()
		return err
	})
	return res, err
}

// ReservationCapacity reads the cluster's default reservation: its path,
// how many nodes it holds and how many are in use.
func (m *Manager) ReservationCapacity(ctx context.Context, c Cluster) (path string, count, inUse int64, err error) {
	ref, err := parseReservation(c)
	if err != nil {
		return c.DefaultReservation, 0, 0, err
	}
	res, err := m.readReservation(ctx, ref)
	if err != nil {
		return ref.path, 0, 0, fmt.Errorf("read reservation %s: %s", ref.path, apiMessage(err))
	}
	if res.SpecificReservation == nil {
		return ref.path, 0, 0, fmt.Errorf("reservation %s is not a specific reservation", ref.path)
	}
	return ref.path, res.SpecificReservation.Count, res.SpecificReservation.InUseCount, nil
}

// ensureWorkloadPolicy makes sure the Compute workload policy a multi-host
// v7x pool names exists: one per accelerator and topology, shared by every
// pool of that shape, so it is created once and never deleted. A concurrent
// creator winning (409) is success.
func (m *Manager) ensureWorkloadPolicy(ctx context.Context, c Cluster, sl accelerator.Slice, pool string) error {
	name := m.opts.workloadPolicy(sl)
	region := regionOf(c.Location)
	err := m.retry(ctx, func() error {
		_, err := m.compute.ResourcePolicies.Get(c.Project, region, name).Context(ctx).Do()
		return err
	})
	if err == nil {
		return nil
	}
	if !isNotFound(err) {
		return fmt.Errorf("read workload policy %s: %w", name, err)
	}
	policy := &compute.ResourcePolicy{
		Name:        name,
		Description: "Falcon: placement of " + sl.Spec.Name + " " + sl.Topology + " slices",
		WorkloadPolicy: &compute.ResourcePolicyWorkloadPolicy{
			Type:                "HIGH_THROUGHPUT",
			AcceleratorTopology: sl.Topology,
		},
	}
	err = m.retry(ctx, func() error {
		_, err := m.compute.ResourcePolicies.Insert(c.Project, region, policy).Context(ctx).Do()
		return err
	})
	switch {
	case err == nil, isConflict(err):
		return nil
	case apiCode(err) >= 400 && apiCode(err) < 500 && !transient(err):
		return failed(pool, fmt.Sprintf("Compute refused to create workload policy %s: %s", name, apiMessage(err)), err)
	default:
		return fmt.Errorf("create workload policy %s: %w", name, err)
	}
}

// regionOf is the region of a zone (us-central1-a -> us-central1), or the
// location itself when it is a region.
func regionOf(location string) string {
	if strings.Count(location, "-") >= 2 {
		return location[:strings.LastIndex(location, "-")]
	}
	return location
}
