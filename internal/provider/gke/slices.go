package gke

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	container "google.golang.org/api/container/v1"

	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/placement"
)

// A multi-slice job runs on a pool group: one node pool per slice, named
// placement.SlicePool(group, i) and labelled with the group and its size.
// The group is what the resource manager sees (ListPools lists it as one
// pool of shape placement.GroupShape) and records as the job's node pool,
// so the slices are acquired, reused and released together: the group is
// ready when every member is RUNNING, and it is deleted member by member.
const (
	LabelSliceGroup = "falcon.dev/slice-group"
	LabelSlices     = "falcon.dev/slices" // how many members the group has
)

// GroupName is the pool group of a multi-slice job: PoolName shortened so
// that every member's name (SlicePool) fits GKE's 40 characters.
func GroupName(jobID string) (string, error) {
	return poolName(jobID, maxPoolName-placement.MaxSlicePoolSuffix)
}

// groupMembers are the names of the group's pools, in slice order.
func groupMembers(group string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = placement.SlicePool(group, i)
	}
	return out
}

// ensureGroup is Ensure for a multi-slice job: every member of its group
// exists or is being created. The supply mode is chosen once for the
// whole group (the reservation only if it has room for every slice), so
// the slices come from the same supply and no reservation capacity is held
// by one slice while another waits for flex-start. Members that exist
// already (a restart mid-create) are adopted and the rest created in their
// mode.
func (m *Manager) ensureGroup(ctx context.Context, req Request) (Result, error) {
	group, err := GroupName(req.JobID)
	if err != nil {
		return Result{}, failed("", err.Error(), err)
	}
	names := groupMembers(group, req.Slices)
	var missing []string
	var existing *PoolInfo
	for _, n := range names {
		np, err := m.getPool(ctx, req.Cluster, n)
		switch {
		case isNotFound(err):
			missing = append(missing, n)
		case err != nil:
			return Result{}, fmt.Errorf("get node pool %s: %w", n, err)
		case existing == nil:
			info := poolInfo(np)
			existing = &info
		}
	}
	if len(missing) == 0 {
		return Result{Pool: group, Mode: existing.Mode, Reason: lifecycle.ReasonProvisioning, Adopted: true, CreatedAt: existing.CreatedAt,
			Message: fmt.Sprintf("adopted node pool group %s: %d slice pools (%s)", group, len(names), existing.Mode)}, nil
	}
	var (
		mode   SupplyMode
		reason = lifecycle.ReasonProvisioning
		msg    string
		res    *reservationRef
	)
	if existing != nil {
		mode = existing.Mode
		if mode == SupplyReservation {
			if res, err = parseReservation(req.Cluster); err != nil {
				return Result{}, failed(group, err.Error(), err)
			}
		}
		msg = fmt.Sprintf("completing node pool group %s (%s): creating %d of its %d slice pools", group, mode, len(missing), len(names))
	} else if mode, reason, msg, res, err = m.chooseMode(ctx, req); err != nil {
		return Result{}, err
	}
	if req.Slice.NeedsPlacementPolicy() {
		if err := m.ensureWorkloadPolicy(ctx, req.Cluster, req.Slice, group); err != nil {
			return Result{}, err
		}
	}
	now := m.opts.clock.Now()
	for _, n := range missing {
		spec := m.poolSpec(n, req.JobID, req.Slice, mode, res, now)
		spec.Config.Labels[LabelSliceGroup] = group
		spec.Config.Labels[LabelSlices] = strconv.Itoa(req.Slices)
		if err := m.createMember(ctx, req.Cluster, group, spec); err != nil {
			return Result{}, err
		}
	}
	return Result{Pool: group, Mode: mode, Reason: reason, Message: msg, CreatedAt: now}, nil
}

// refuse records that GKE refused a member of group (Manager.refused).
func (m *Manager) refuse(c Cluster, group string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refused == nil {
		m.refused = map[string]bool{}
	}
	m.refused[c.path()+"/"+group] = true
}

// Refused reports the groups of c that GKE refused a member of.
func (m *Manager) Refused(c Cluster) func(group string) bool {
	return func(group string) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.refused[c.path()+"/"+group]
	}
}

// listGroup returns the members of group that exist, in slice order; none
// when group names no group (a single pool, or nothing).
func (m *Manager) listGroup(ctx context.Context, c Cluster, group string) ([]PoolInfo, error) {
	infos, err := m.ListFalconPools(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []PoolInfo
	for _, p := range infos {
		if p.Labels[LabelSliceGroup] == group {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b PoolInfo) int { return memberIndex(a) - memberIndex(b) })
	return out, nil
}

// memberIndex is a member's slice, from its name.
func memberIndex(p PoolInfo) int {
	i := strings.LastIndex(p.Name, "-s")
	n, err := strconv.Atoi(p.Name[i+2:])
	if i < 0 || err != nil {
		return -1
	}
	return n
}

// groupSize is how many members the group of p has, by its label.
func groupSize(p PoolInfo) int {
	n, _ := strconv.Atoi(p.Labels[LabelSlices])
	return n
}

// Readiness is one look at a job's pool or pool group.
type Readiness struct {
	Ready bool
	// Message says how far a group is (1/2 slice pools RUNNING); empty for
	// a single pool.
	Message string
}

// Look is Check for a job's pool, which may be a group: a group is ready
// once every member is RUNNING, and fails as soon as one member does (its
// members' own timeouts included, so no slice waits for the others longer
// than the node-pool timeout; the resource manager then deletes the whole
// group). A group missing members, as a controller that died while
// creating them leaves it, is completed here from an existing member's
// spec.
func (m *Manager) Look(ctx context.Context, c Cluster, pool string) (Readiness, error) {
	np, err := m.getPool(ctx, c, pool)
	if !isNotFound(err) {
		created := m.opts.clock.Now()
		if err == nil {
			if info := poolInfo(np); !info.CreatedAt.IsZero() {
				created = info.CreatedAt
			}
		} else if transient(err) {
			return Readiness{}, nil
		}
		ready, err := m.judge(pool, np, err, created.Add(m.opts.provisionTimeout))
		return Readiness{Ready: ready}, err
	}
	members, lerr := m.listGroup(ctx, c, pool)
	if lerr != nil {
		return Readiness{}, nil // look again later
	}
	if len(members) == 0 {
		ready, err := m.judge(pool, nil, err, m.opts.clock.Now())
		return Readiness{Ready: ready}, err
	}
	want, mode := groupSize(members[0]), members[0].Mode
	if len(members) < want {
		if err := m.completeGroup(ctx, c, pool, members, want); err != nil {
			return Readiness{}, err
		}
	}
	running := 0
	for _, p := range members {
		np, err := m.getPool(ctx, c, p.Name)
		if err != nil && !isNotFound(err) && transient(err) {
			return Readiness{Message: fmt.Sprintf("node pool group %s (%s): %d/%d slice pools RUNNING", pool, mode, running, want)}, nil
		}
		created := p.CreatedAt
		if created.IsZero() {
			created = m.opts.clock.Now()
		}
		ready, err := m.judge(p.Name, np, err, created.Add(m.opts.provisionTimeout))
		if err != nil {
			if pe, ok := err.(*PoolError); ok {
				pe.Pool = pool
				pe.Message = fmt.Sprintf("node pool group %s: %s", pool, pe.Message)
			}
			return Readiness{}, err
		}
		if ready {
			running++
		}
	}
	return Readiness{Ready: running == want, Message: fmt.Sprintf("node pool group %s (%s): %d/%d slice pools RUNNING", pool, mode, running, want)}, nil
}

// completeGroup creates the members of group that are missing, each a copy
// of an existing member's spec under its own name and with its own
// creation time, from which its provision timeout counts.
func (m *Manager) completeGroup(ctx context.Context, c Cluster, group string, have []PoolInfo, want int) error {
	src, err := m.getPool(ctx, c, have[0].Name)
	if err != nil {
		return nil // look again later
	}
	exists := map[string]bool{}
	for _, p := range have {
		exists[p.Name] = true
	}
	for _, n := range groupMembers(group, want) {
		if exists[n] {
			continue
		}
		cfg := *src.Config
		cfg.Labels = maps.Clone(src.Config.Labels)
		cfg.Labels[LabelCreatedAt] = strconv.FormatInt(m.opts.clock.Now().Unix(), 10)
		spec := &container.NodePool{
			Name: n, InitialNodeCount: src.InitialNodeCount, Config: &cfg, Autoscaling: src.Autoscaling,
			Locations: src.Locations, PlacementPolicy: src.PlacementPolicy,
		}
		if err := m.createMember(ctx, c, group, spec); err != nil {
			return err
		}
	}
	return nil
}

// createMember creates one member of group. A concurrent create winning
// (409) is success: the pool is ours. A refusal that will not pass fails
// the group for good (refuse); anything else is retried by the caller.
func (m *Manager) createMember(ctx context.Context, c Cluster, group string, spec *container.NodePool) error {
	err := m.retry(ctx, func() error {
		_, err := m.container.Projects.Locations.Clusters.NodePools.Create(c.path(), &container.CreateNodePoolRequest{NodePool: spec}).Context(ctx).Do()
		return err
	})
	switch {
	case err == nil, isConflict(err):
		return nil
	case apiCode(err) >= 400 && apiCode(err) < 500 && !transient(err):
		m.refuse(c, group)
		return failed(group, fmt.Sprintf("GKE refused to create node pool %s of group %s: %s", spec.Name, group, apiMessage(err)), err)
	default:
		return fmt.Errorf("create node pool %s of group %s: %w", spec.Name, group, err)
	}
}

// Delete starts deleting a job's pool or every member of its pool group.
// A member busy with another operation makes it ErrBusy after the others
// have been asked; a missing pool or group is success.
func (m *Manager) Delete(ctx context.Context, c Cluster, pool string) error {
	found, err := m.startDelete(ctx, c, pool)
	if found || err != nil {
		return err
	}
	members, err := m.listGroup(ctx, c, pool)
	if err != nil {
		return err
	}
	var first error
	for _, p := range members {
		if _, err := m.startDelete(ctx, c, p.Name); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// groupPools folds the members of each pool group in infos into one
// PoolInfo named after the group, as the resource manager sees it; single
// pools pass through. A group's state is its least ready member's, and a
// group missing members is still provisioning (Look completes it), unless
// GKE refused one of its members (refused): then it is failed, for the
// resource manager to delete.
func groupPools(infos []PoolInfo, refused func(group string) bool) []PoolInfo {
	var out []PoolInfo
	at := map[string]int{}
	count := map[string]int{}
	for _, p := range infos {
		g := p.Labels[LabelSliceGroup]
		if g == "" {
			out = append(out, p)
			continue
		}
		count[g]++
		i, ok := at[g]
		if !ok {
			at[g] = len(out)
			q := p
			q.Name = g
			q.Labels = map[string]string{}
			for k, v := range p.Labels {
				q.Labels[k] = v
			}
			out = append(out, q)
			continue
		}
		q := &out[i]
		q.Nodes += p.Nodes
		q.Status = worseStatus(q.Status, p.Status)
		if !p.CreatedAt.IsZero() && (q.CreatedAt.IsZero() || p.CreatedAt.Before(q.CreatedAt)) {
			q.CreatedAt = p.CreatedAt
		}
	}
	for g, i := range at {
		switch {
		case refused != nil && refused(g) && out[i].Status != "STOPPING":
			out[i].Status = "ERROR"
		case count[g] < groupSize(out[i]) && out[i].Status != "STOPPING" && out[i].Status != "ERROR":
			out[i].Status = "PROVISIONING"
		}
	}
	return out
}

// statusRank orders GKE's node pool statuses from least to most ready.
var statusRank = map[string]int{
	"ERROR": 0, "STOPPING": 1, "PROVISIONING": 2, "RECONCILING": 3, "RUNNING_WITH_ERROR": 4, "RUNNING": 5,
}

func worseStatus(a, b string) string {
	ra, oka := statusRank[a]
	rb, okb := statusRank[b]
	switch {
	case !oka:
		return a
	case !okb:
		return b
	case rb < ra:
		return b
	}
	return a
}
