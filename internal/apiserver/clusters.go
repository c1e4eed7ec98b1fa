package apiserver

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/changefeed"
	"github.com/falconhq/falcon/internal/clusterconfig"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

// The actions ApplyClusters reports per cluster.
const (
	ActionCreated   = "created"
	ActionUpdated   = "updated"
	ActionUnchanged = "unchanged"
	ActionOffline   = "offline"
	ActionDeleted   = "deleted"
)

// GetCluster finds a cluster by name or ID.
func (s *Server) GetCluster(ctx context.Context, req *falconv1.GetClusterRequest) (*falconv1.Cluster, error) {
	if req.GetName() == "" {
		return nil, errdefs.Invalid("name", "is required")
	}
	c, err := s.store.GetCluster(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return clusterToAPI(c), nil
}

// GetClusterStatus is the capacity view: what the resource manager last
// reported of the cluster. A cluster no controller has reported on yet has
// an empty view, not an error, so a new cluster's status reads sensibly.
func (s *Server) GetClusterStatus(ctx context.Context, req *falconv1.GetClusterStatusRequest) (*falconv1.ClusterStatus, error) {
	if req.GetName() == "" {
		return nil, errdefs.Invalid("name", "is required")
	}
	c, err := s.store.GetCluster(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	raw, at, err := s.store.GetClusterReport(ctx, c.Name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return s.withProbe(ctx, &falconv1.ClusterStatus{ClusterName: c.Name})
	}
	if err != nil {
		return nil, err
	}
	out := &falconv1.ClusterStatus{}
	if err := protojson.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("cluster %s: stored status is unreadable: %w", c.Name, err)
	}
	out.ClusterName = c.Name
	out.ReportedAt = timestamppb.New(at)
	return s.withProbe(ctx, out)
}

// withProbe adds the cluster's last probe to its status, when it has one.
func (s *Server) withProbe(ctx context.Context, st *falconv1.ClusterStatus) (*falconv1.ClusterStatus, error) {
	probes, err := s.store.ListClusterProbes(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range probes {
		if p.Cluster == st.GetClusterName() {
			st.Probe = probeToAPI(p)
		}
	}
	return st, nil
}

// ClusterProber probes clusters on demand (ProbeClusters): each cluster in
// parallel, each within its own time limit. It never fails as a whole; a
// cluster it cannot reach is a result saying so.
type ClusterProber interface {
	Probe(ctx context.Context, clusters []*falconv1.Cluster) []*falconv1.ClusterProbe
}

// WithClusterProber lets ProbeClusters probe from this server, with its
// credentials for the clusters.
func WithClusterProber(p ClusterProber) Option { return func(s *Server) { s.prober = p } }

// ListClusterProbes returns the last probe of every probed cluster.
func (s *Server) ListClusterProbes(ctx context.Context, _ *falconv1.ListClusterProbesRequest) (*falconv1.ListClusterProbesResponse, error) {
	probes, err := s.store.ListClusterProbes(ctx)
	if err != nil {
		return nil, err
	}
	out := &falconv1.ListClusterProbesResponse{Items: make([]*falconv1.ClusterProbe, 0, len(probes))}
	for _, p := range probes {
		out.Items = append(out.Items, probeToAPI(p))
	}
	return out, nil
}

// ProbeClusters probes the named clusters now (every active one when none
// is named), stores the results and returns them, by cluster name.
func (s *Server) ProbeClusters(ctx context.Context, req *falconv1.ProbeClustersRequest) (*falconv1.ListClusterProbesResponse, error) {
	if s.prober == nil {
		return nil, errdefs.Precondition("this server does not probe clusters itself; the controller probes them on its schedule (falcon cluster status shows the last probe)")
	}
	var targets []*falconv1.Cluster
	if len(req.GetNames()) == 0 {
		rows, err := s.store.ListClusters(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if r.Status == store.ClusterActive && clusterconfig.Probed(r.Backend) {
				targets = append(targets, clusterToAPI(r))
			}
		}
	}
	for i, n := range req.GetNames() {
		c, err := s.store.GetCluster(ctx, n)
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, errdefs.Invalid(fmt.Sprintf("names[%d]", i), "no cluster is named %q", n)
		}
		if err != nil {
			return nil, err
		}
		if !clusterconfig.Probed(c.Backend) {
			// A probe of it could only fail, and would be kept as if the
			// cluster were unreachable.
			probed := slices.DeleteFunc(slices.Clone(clusterconfig.Backends), func(b string) bool { return !clusterconfig.Probed(b) })
			return nil, errdefs.Invalid(fmt.Sprintf("names[%d]", i), "cluster %s (backend %s) runs its jobs as this controller's own processes and is not probed; probes ask %s clusters",
				n, c.Backend, strings.Join(probed, ", "))
		}
		targets = append(targets, clusterToAPI(c))
	}
	results := s.prober.Probe(ctx, targets)
	if err := s.storeProbes(ctx, results); err != nil {
		return nil, err
	}
	slices.SortFunc(results, func(a, b *falconv1.ClusterProbe) int { return strings.Compare(a.GetCluster(), b.GetCluster()) })
	return &falconv1.ListClusterProbesResponse{Items: results}, nil
}

// ReportClusterProbes stores the controller's scheduled probes.
func (s *Server) ReportClusterProbes(ctx context.Context, req *falconv1.ReportClusterProbesRequest) (*falconv1.ListClusterProbesResponse, error) {
	for i, p := range req.GetItems() {
		if p.GetCluster() == "" {
			return nil, errdefs.Invalid(fmt.Sprintf("items[%d].cluster", i), "is required")
		}
		if p.GetProbedAt() == nil {
			return nil, errdefs.Invalid(fmt.Sprintf("items[%d].probed_at", i), "is required")
		}
	}
	if err := s.storeProbes(ctx, req.GetItems()); err != nil {
		return nil, err
	}
	return &falconv1.ListClusterProbesResponse{Items: req.GetItems()}, nil
}

func (s *Server) storeProbes(ctx context.Context, in []*falconv1.ClusterProbe) error {
	rows := make([]store.ClusterProbe, 0, len(in))
	for _, p := range in {
		r := store.ClusterProbe{Cluster: p.GetCluster(), Reachable: p.GetReachable(), Error: p.GetError(), ProbedAt: p.GetProbedAt().AsTime()}
		if p.QueueDepth != nil {
			n := int(p.GetQueueDepth())
			r.QueueDepth = &n
		}
		if p.RunningCount != nil {
			n := int(p.GetRunningCount())
			r.RunningCount = &n
		}
		rows = append(rows, r)
	}
	return s.store.PutClusterProbes(ctx, rows)
}

func probeToAPI(p store.ClusterProbe) *falconv1.ClusterProbe {
	out := &falconv1.ClusterProbe{Cluster: p.Cluster, Reachable: p.Reachable, Error: p.Error, ProbedAt: timestamppb.New(p.ProbedAt)}
	if p.QueueDepth != nil {
		n := int32(*p.QueueDepth)
		out.QueueDepth = &n
	}
	if p.RunningCount != nil {
		n := int32(*p.RunningCount)
		out.RunningCount = &n
	}
	return out
}

// ReportClusterStatus stores the resource manager's view of a cluster.
func (s *Server) ReportClusterStatus(ctx context.Context, req *falconv1.ReportClusterStatusRequest) (*falconv1.ClusterStatus, error) {
	st := req.GetStatus()
	if st.GetClusterName() == "" {
		return nil, errdefs.Invalid("status.cluster_name", "is required")
	}
	at := time.Now()
	if st.GetReportedAt() != nil {
		if err := st.GetReportedAt().CheckValid(); err != nil {
			return nil, errdefs.Invalid("status.reported_at", "%v", err)
		}
		at = st.GetReportedAt().AsTime()
	}
	raw, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	if err := s.store.PutClusterReport(ctx, st.GetClusterName(), raw, at); err != nil {
		return nil, err
	}
	return st, nil
}

// ListClusters lists every registered cluster.
func (s *Server) ListClusters(ctx context.Context, _ *falconv1.ListClustersRequest) (*falconv1.ListClustersResponse, error) {
	cs, err := s.store.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	sel, err := s.selection(ctx)
	if err != nil {
		return nil, err
	}
	resp := &falconv1.ListClustersResponse{Items: make([]*falconv1.Cluster, 0, len(cs)), Selection: sel}
	for _, c := range cs {
		resp.Items = append(resp.Items, clusterToAPI(c))
	}
	return resp, nil
}

// RegisterCluster creates or updates a cluster by name. The request is held
// to the registry's rules (clusterconfig.Normalize) and stored in its
// normal form; an unset status is active, as in a clusters file.
func (s *Server) RegisterCluster(ctx context.Context, req *falconv1.RegisterClusterRequest) (*falconv1.Cluster, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetCluster() == nil {
		return nil, errdefs.Invalid("cluster", "is required")
	}
	c, errs := clusterconfig.Normalize(req.GetCluster())
	if c != nil {
		errs = append(errs, clusterconfig.CheckXpkPath(c, exec.LookPath)...)
	}
	if err := prefixed("cluster", errs).Err(); err != nil {
		return nil, err
	}
	if p.IsController() {
		old, err := s.controllerMayRegister(ctx, c)
		if err != nil {
			return nil, err
		}
		if old != nil {
			// A controller re-registers its local cluster on every start;
			// that must not undo an admin's maintenance or offline.
			c.Status = old.Status
		}
	}
	row := clusterFromAPI(c)
	row.ID, row.CreatedAt = ids.New(ids.Cluster), s.now()
	out, err := s.store.UpsertCluster(ctx, row)
	if err != nil {
		return nil, err
	}
	s.changed(changefeed.Change{Kind: "cluster"})
	noteAudit(ctx, "", "backend="+out.Backend+" status="+out.Status)
	return clusterToAPI(out), nil
}

// controllerMayRegister lets a controller register only the local cluster
// it runs, the one registration a controller makes (falcon controller
// --local-cluster), and returns the registered row when there is one. A
// leaked controller secret can then add only local clusters, whose jobs run
// as processes beside a controller, and can neither turn an admin's
// cluster local nor bring a cluster an admin took out of service back.
func (s *Server) controllerMayRegister(ctx context.Context, c *falconv1.Cluster) (*store.Cluster, error) {
	if c.GetBackend() != localBackend {
		return nil, fmt.Errorf("%w: controllers may register only a %s cluster (the one they run); %s clusters are an admin's to register",
			errdefs.ErrPermissionDenied, localBackend, c.GetBackend())
	}
	old, err := s.store.GetCluster(ctx, c.GetName())
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case old.Backend != localBackend:
		return nil, fmt.Errorf("%w: cluster %s is a %s cluster; a controller may not register a local cluster in its place",
			errdefs.ErrPermissionDenied, old.Name, old.Backend)
	}
	return old, nil
}

// localBackend is the backend whose clusters belong to the process running
// their jobs (provider/local's BackendName; the API server does not import
// the providers).
const localBackend = "local"

// ApplyClusters converges the registry to the request's clusters, in four
// steps:
//
//  1. Check every cluster; any problem refuses the whole request, so nothing
//     is written.
//  2. Compare each with the registry: created, updated (naming the fields
//     that differ) or unchanged. A cluster registered but not listed is
//     taken offline, or with prune deleted unless jobs that have not
//     finished still name it: then it is taken offline instead. Local
//     clusters are left alone: the process running them registers them.
//  3. Unless dry_run, write: upsert what is created or updated, then take
//     offline or delete what is missing. Unchanged clusters are not touched.
//  4. Report every cluster's action, by name, and the registry as it now
//     is (or, for dry_run, would be).
//
// Step 3 is not one transaction, but each write is idempotent: after a
// failure half way, applying the same request again finishes the job.
func (s *Server) ApplyClusters(ctx context.Context, req *falconv1.ApplyClustersRequest) (*falconv1.ApplyClustersResponse, error) {
	desired, selection, err := checkApply(req.GetClusters(), req.GetSelection())
	if err != nil {
		return nil, err
	}
	rows, err := s.store.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	prevSelection, err := s.selection(ctx)
	if err != nil {
		return nil, err
	}
	existing := make(map[string]*store.Cluster, len(rows))
	for _, r := range rows {
		existing[r.Name] = r
	}

	type step struct {
		change *falconv1.ClusterChange
		item   *falconv1.Cluster // nil once deleted
		upsert *store.Cluster
		prune  bool // try to delete; offline if refused
	}
	var steps []*step
	for _, d := range desired {
		st := &step{change: &falconv1.ClusterChange{Name: d.GetName()}, item: d}
		old, ok := existing[d.GetName()]
		switch {
		case !ok:
			st.change.Action = ActionCreated
			st.upsert = clusterFromAPI(d)
			st.upsert.ID, st.upsert.CreatedAt = ids.New(ids.Cluster), s.now()
		default:
			cur := clusterToAPI(old)
			d.Id, d.CreatedAt = cur.GetId(), cur.GetCreatedAt()
			if fields := diffClusters(cur, d); len(fields) > 0 {
				st.change.Action, st.change.Fields = ActionUpdated, fields
				st.upsert = clusterFromAPI(d)
				st.upsert.ID, st.upsert.CreatedAt = old.ID, old.CreatedAt
			} else {
				st.change.Action, st.item = ActionUnchanged, cur
			}
		}
		steps = append(steps, st)
	}
	listed := make(map[string]bool, len(desired))
	for _, d := range desired {
		listed[d.GetName()] = true
	}
	for _, r := range rows {
		if listed[r.Name] {
			continue
		}
		if r.Backend == localBackend {
			// A local cluster belongs to the process that runs its jobs
			// (falcon dev, falcon controller --local-cluster), which
			// registers it at start; a registry file does not manage it.
			steps = append(steps, &step{change: &falconv1.ClusterChange{Name: r.Name, Action: ActionUnchanged}, item: clusterToAPI(r)})
			continue
		}
		st := &step{change: &falconv1.ClusterChange{Name: r.Name, Action: ActionOffline}, item: clusterToAPI(r), prune: req.GetPrune()}
		if r.Status != store.ClusterOffline {
			st.change.Fields = []string{"status"}
			st.item.Status = store.ClusterOffline
		}
		steps = append(steps, st)
	}
	slices.SortFunc(steps, func(a, b *step) int { return strings.Compare(a.change.GetName(), b.change.GetName()) })

	wrote := false
	defer func() {
		if wrote {
			s.changed(changefeed.Change{Kind: "cluster"})
		}
	}()
	// Creates and updates first, so a failure part way never leaves a
	// listed cluster missing while unlisted ones are already gone.
	for _, st := range steps {
		if st.upsert == nil || req.GetDryRun() {
			continue
		}
		out, err := s.store.UpsertCluster(ctx, st.upsert)
		if err != nil {
			return nil, fmt.Errorf("apply cluster %s: %w", st.change.GetName(), err)
		}
		wrote = true
		st.item = clusterToAPI(out)
	}
	for _, st := range steps {
		if st.change.GetAction() != ActionOffline {
			continue
		}
		name := st.change.GetName()
		if st.prune {
			deleted, err := s.pruneCluster(ctx, name, req.GetDryRun())
			if err != nil {
				return nil, err
			}
			wrote = wrote || (deleted && !req.GetDryRun())
			if deleted {
				st.change.Action, st.change.Fields, st.item = ActionDeleted, nil, nil
				continue
			}
		}
		if len(st.change.GetFields()) == 0 || req.GetDryRun() {
			continue
		}
		row := existing[name]
		row.Status = store.ClusterOffline
		out, err := s.store.UpsertCluster(ctx, row)
		if err != nil {
			return nil, fmt.Errorf("take cluster %s offline: %w", name, err)
		}
		wrote = true
		st.item = clusterToAPI(out)
	}

	resp := &falconv1.ApplyClustersResponse{Selection: selection}
	var summary []string
	if selection != prevSelection {
		// After the clusters: the policy then places jobs on the registry
		// the file describes.
		if !req.GetDryRun() {
			if err := s.store.PutRegistrySetting(ctx, store.SettingSelection, selection); err != nil {
				return nil, fmt.Errorf("apply selection: %w", err)
			}
			wrote = true
		}
		resp.PreviousSelection = prevSelection
		summary = append(summary, "selection: "+prevSelection+" -> "+selection)
	}
	for _, st := range steps {
		if a := st.change.GetAction(); a != ActionUnchanged {
			summary = append(summary, st.change.GetName()+": "+a)
		}
		resp.Changes = append(resp.Changes, st.change)
		if st.item != nil {
			resp.Items = append(resp.Items, st.item)
		}
	}
	if len(summary) == 0 {
		summary = []string{"nothing changed"}
	}
	noteAudit(ctx, "", strings.Join(summary, ", "))
	return resp, nil
}

// pruneCluster deletes the cluster, or for a dry run checks that it could
// be deleted. It reports false when jobs that have not finished name it.
func (s *Server) pruneCluster(ctx context.Context, name string, dryRun bool) (bool, error) {
	if dryRun {
		live, _, err := s.store.ListJobs(ctx, store.JobFilter{
			ClusterName: name, Statuses: lifecycle.JobMachine.NonTerminal(), Page: store.Page{Size: 1},
		})
		return len(live) == 0, err
	}
	switch err := s.store.DeleteCluster(ctx, name); {
	case err == nil, errors.Is(err, errdefs.ErrNotFound): // gone already: the goal is met
		return true, nil
	case errors.Is(err, errdefs.ErrFailedPrecondition):
		return false, nil
	default:
		return false, fmt.Errorf("delete cluster %s: %w", name, err)
	}
}

// checkApply normalizes every cluster of an apply request and its selection
// policy; any problem, in any cluster or the policy, is an error and the
// request writes nothing.
func checkApply(in []*falconv1.Cluster, selection string) ([]*falconv1.Cluster, string, error) {
	var errs errdefs.FieldErrors
	sel, ferr := clusterconfig.NormalizeSelection(selection)
	if ferr != nil {
		errs = append(errs, ferr)
	}
	if len(in) == 0 {
		errs.Add("clusters", "is required: an apply lists every cluster of the registry, and one listing none would take them all offline; use set-status to take clusters offline")
		return nil, "", errs
	}
	out := make([]*falconv1.Cluster, 0, len(in))
	first := map[string]int{}
	for i, c := range in {
		path := fmt.Sprintf("clusters[%d]", i)
		n, ferrs := clusterconfig.Normalize(c)
		errs = append(errs, prefixed(path, ferrs)...)
		if n != nil {
			n.Id, n.CreatedAt = "", nil // the registry's to set
			errs = append(errs, prefixed(path, clusterconfig.CheckXpkPath(n, exec.LookPath))...)
		}
		if name := c.GetName(); name != "" {
			if j, dup := first[name]; dup {
				errs.Add(path+".name", "%q is listed twice (also clusters[%d])", name, j)
			} else {
				first[name] = i
			}
		}
		out = append(out, n)
	}
	if err := errs.Err(); err != nil {
		return nil, "", err
	}
	return out, sel, nil
}

// selection is the registry's selection policy as stored ("spread" when
// never set). A value this server does not know (written by a newer one)
// is served as it is: the resource manager decides what to do with it, and
// listing the clusters does not fail over it.
func (s *Server) selection(ctx context.Context) (string, error) {
	v, err := s.store.RegistrySetting(ctx, store.SettingSelection)
	if err != nil || v != "" {
		return v, err
	}
	def, _ := clusterconfig.NormalizeSelection("")
	return def, nil
}

// SetClusterStatus moves a cluster to active, maintenance or offline. Only
// active clusters receive new jobs; the others keep what they run.
func (s *Server) SetClusterStatus(ctx context.Context, req *falconv1.SetClusterStatusRequest) (*falconv1.Cluster, error) {
	var errs errdefs.FieldErrors
	if req.GetName() == "" {
		errs.Add("name", "is required")
	}
	if st := req.GetStatus(); !slices.Contains(clusterconfig.Statuses, st) {
		errs.Add("status", "%q is not a cluster status; allowed: %s", st, strings.Join(clusterconfig.Statuses, ", "))
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	c, err := s.store.GetCluster(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	if c.Status == req.GetStatus() {
		return clusterToAPI(c), nil
	}
	noteAudit(ctx, "", "status "+c.Status+" -> "+req.GetStatus())
	c.Status = req.GetStatus()
	out, err := s.store.UpsertCluster(ctx, c)
	if err != nil {
		return nil, err
	}
	s.changed(changefeed.Change{Kind: "cluster"})
	return clusterToAPI(out), nil
}

// clusterFromAPI converts a normalized cluster; ID and CreatedAt are left
// for the caller.
func clusterFromAPI(c *falconv1.Cluster) *store.Cluster {
	out := &store.Cluster{
		Name: c.GetName(), Backend: c.GetBackend(), Project: c.GetProject(), Location: c.GetLocation(),
		AcceleratorTypes: c.GetAcceleratorTypes(), GCSBucket: c.GetGcsBucket(),
		DefaultReservation: c.GetDefaultReservation(), Status: c.GetStatus(),
		Spec: store.ClusterSpec{
			Namespace: c.GetNamespace(), Kubeconfig: c.GetKubeconfig(), KubeContext: c.GetKubeContext(),
			GKECluster: c.GetGkeCluster(), MaxQueueDepth: int(c.GetMaxQueueDepth()), Labels: c.GetLabels(),
			ServiceAccount: c.GetServiceAccount(), XpkPath: c.GetXpkPath(), ProbeTimeoutS: int(c.GetProbeTimeoutS()),
			ExtraArgs: c.GetExtraArgs(),
		},
	}
	for _, a := range c.GetAccelerators() {
		out.Spec.Accelerators = append(out.Spec.Accelerators, store.AcceleratorSlot{Type: a.GetType(), Priority: int(a.GetPriority()), DeviceClass: a.GetDeviceClass()})
	}
	return out
}

// diffIgnored are the fields an apply does not compare: the server sets id
// and created_at, name is the key, and accelerator_types follows from
// accelerators (which is what a change is reported as).
var diffIgnored = []protoreflect.Name{"id", "name", "created_at", "accelerator_types"}

// diffClusters names the fields in which b differs from a, in field number
// order. It walks the message descriptor, so a field added to Cluster is
// compared without anyone remembering to add it here.
func diffClusters(a, b *falconv1.Cluster) []string {
	var out []string
	fields := a.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if slices.Contains(diffIgnored, fd.Name()) {
			continue
		}
		if !proto.Equal(only(a, fd), only(b, fd)) {
			out = append(out, string(fd.Name()))
		}
	}
	return out
}

// only returns a Cluster holding just c's field fd.
func only(c *falconv1.Cluster, fd protoreflect.FieldDescriptor) *falconv1.Cluster {
	out := &falconv1.Cluster{}
	if m := c.ProtoReflect(); m.Has(fd) {
		out.ProtoReflect().Set(fd, m.Get(fd))
	}
	return out
}

// prefixed puts errs under path (cluster.name, clusters[2].backend).
func prefixed(path string, errs errdefs.FieldErrors) errdefs.FieldErrors {
	out := make(errdefs.FieldErrors, 0, len(errs))
	for _, e := range errs {
		out = append(out, &errdefs.FieldError{Field: path + "." + e.Field, Detail: e.Detail})
	}
	return out
}
