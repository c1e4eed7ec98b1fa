package apiserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/artifactindex"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/changefeed"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/validation"
)

// ArtifactTypeOutput is the type of the artifact every experiment gets: the
// directory its jobs write into.
const ArtifactTypeOutput = "output"

// CreateExp validates the request and writes the experiment, one job per
// role and the artifact in one transaction.
func (s *Server) CreateExp(ctx context.Context, req *falconv1.CreateExpRequest) (*falconv1.Experiment, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	in := req.GetExperiment()
	clusters, err := s.store.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	registry := make([]*falconv1.Cluster, 0, len(clusters))
	for _, c := range clusters {
		names = append(names, c.Name)
		registry = append(registry, clusterToAPI(c))
	}
	if err := validation.Experiment(in, func(n string) bool { return slices.Contains(names, n) }, names); err != nil {
		return nil, err
	}
	// Only a well-formed request can be held against the clusters (a known
	// device type, a registered pin). These are the resource manager's
	// placement rules: what they refuse would wait or fail after the fact.
	if err := validation.Placement(in, registry); err != nil {
		return nil, err
	}

	if in.Ttl != nil {
		if err := s.checkTTL("ttl", in.GetTtl().AsDuration()); err != nil {
			return nil, err
		}
	}
	if in.IdleTtl != nil {
		if err := s.checkTTL("idle_ttl", in.GetIdleTtl().AsDuration()); err != nil {
			return nil, err
		}
	}

	now := s.now()
	exp := &store.Experiment{
		ID: ids.New(ids.Experiment), Name: in.GetName(), ExpType: in.GetExpType(),
		ClusterName: in.GetClusterName(), Priority: in.GetPriority(), Tags: in.GetTags(),
		Config: in.GetConfig(), RoleToTaskSpec: map[string]store.TaskSpec{}, Metrics: metricsFromAPI(in.GetMetrics()),
		Status: lifecycle.Created, Reason: string(lifecycle.ReasonWaiting),
		Message: "waiting for the resource manager", Creator: p.Display(), CreatorID: p.UserID,
		Version: 1, CreatedAt: now, UpdatedAt: now,
		TTL: in.GetTtl().AsDuration(), IdleTTL: in.GetIdleTtl().AsDuration(), Interactive: in.GetInteractive(),
	}
	art := &store.Artifact{
		ID: ids.New(ids.Artifact), ExpID: exp.ID, ArtifactType: ArtifactTypeOutput,
		Status: lifecycle.Created, Version: 1, CreatedAt: now, UpdatedAt: now,
	}
	root, err := s.artifactRootFor(ctx, exp.ClusterName)
	if err != nil {
		return nil, err
	}
	art.Path = root.Join(fmt.Sprintf("experiments/%s/artifacts/%s", exp.ID, art.ID)).String()
	exp.ArtifactPath = art.Path

	roles := make([]string, 0, len(in.GetRoleToTaskSpec()))
	for r := range in.GetRoleToTaskSpec() {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	jobs := make([]*store.Job, 0, len(roles))
	for _, r := range roles {
		t := taskFromAPI(in.GetRoleToTaskSpec()[r])
		if exp.Interactive && strings.TrimSpace(t.Command) == "" {
			t.Command = HoldCommand
		}
		exp.RoleToTaskSpec[r] = t
		jobs = append(jobs, &store.Job{
			ID: ids.New(ids.Job), ExpID: exp.ID, ExpName: exp.Name, Role: r,
			ClusterName: exp.ClusterName, ExpType: exp.ExpType, Priority: exp.Priority,
			TaskSpec: t, Status: lifecycle.Pending, Reason: string(lifecycle.ReasonWaiting),
			Message: "waiting for the resource manager", Creator: p.Display(),
			ArtifactID: art.ID, ArtifactPath: art.Path, Version: 1, CreatedAt: now, UpdatedAt: now,
		})
	}

	if req.GetValidateOnly() {
		// Everything a create would check, the name's uniqueness included,
		// and nothing that only a create makes: no IDs, paths or statuses
		// that a script could mistake for a real experiment's.
		if id, err := s.store.ExpNameTaken(ctx, exp.Name); err != nil {
			return nil, err
		} else if id != "" {
			return nil, store.NameTakenError(exp.Name, id)
		}
		return validated(assemble(exp, jobs, nil)), nil
	}
	if err := s.store.CreateExp(ctx, exp, jobs, art); err != nil {
		return nil, err
	}
	s.changed(created(exp, jobs, art))
	noteAudit(ctx, exp.ID, "name="+exp.Name)
	s.log.Info("experiment created", "exp", exp.ID, "name", exp.Name, "creator", p.Display(), "roles", len(jobs))
	// The store left exp, jobs and art equal to the rows it wrote (its
	// CreateExp's contract), so the answer needs no read back: three
	// queries a create, which competed with every other call for SQLite.
	return assemble(exp, jobs, art), nil
}

// validated strips from an experiment what only creating it makes.
func validated(x *falconv1.Experiment) *falconv1.Experiment {
	x.Id, x.Status, x.Reason, x.Message, x.ArtifactPath, x.Version = "", "", "", "", "", 0
	x.CreatedAt, x.UpdatedAt = nil, nil
	for _, j := range x.GetJobs() {
		j.Id, j.ExpId, j.Status, j.Reason, j.Message, j.ArtifactId, j.ArtifactPath, j.Version = "", "", "", "", "", "", "", 0
		j.CreatedAt, j.UpdatedAt = nil, nil
	}
	return x
}

func assemble(exp *store.Experiment, jobs []*store.Job, art *store.Artifact) *falconv1.Experiment {
	out := expToAPI(exp)
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, jobToAPI(j))
	}
	if art != nil {
		out.Artifact = artifactToAPI(art)
	}
	return out
}

func (s *Server) getExp(ctx context.Context, id string) (*falconv1.Experiment, error) {
	exp, err := s.store.GetExp(ctx, id)
	if err != nil {
		return nil, err
	}
	jobs, err := s.allJobs(ctx, store.JobFilter{ExpID: id})
	if err != nil {
		return nil, err
	}
	arts, _, err := s.store.ListArtifacts(ctx, store.ArtifactFilter{ExpID: id})
	if err != nil {
		return nil, err
	}
	var art *store.Artifact
	if len(arts) > 0 {
		art = arts[0]
	}
	out := assemble(exp, jobs, art)
	if art != nil {
		where, err := s.artifactWhere(ctx, exp, art)
		if err != nil {
			return nil, err
		}
		if where != art.Path {
			// Every copy of the path says where the files are.
			out.Artifact.Path = where
			if out.ArtifactPath == art.Path {
				out.ArtifactPath = where
			}
			for _, j := range out.Jobs {
				if j.ArtifactPath == art.Path {
					j.ArtifactPath = where
				}
			}
		}
	}
	return out, nil
}

// artifactWhere is where art's files are read from: a job placed on a
// cluster with a bucket writes there (the Kubernetes backend's render rule,
// artifactindex.Location) although the experiment was created, unpinned,
// with a path under the server's artifact root; exp get must not send a
// user to a directory that stays empty.
func (s *Server) artifactWhere(ctx context.Context, exp *store.Experiment, art *store.Artifact) (string, error) {
	bucket, err := s.jobBucket(ctx, exp)
	if err != nil || bucket == "" {
		return art.Path, err
	}
	loc, err := artifactindex.Location(art, bucket)
	if err != nil {
		return art.Path, nil // an old artifact with no readable path: shown as stored
	}
	return loc.String(), nil
}

func (s *Server) allJobs(ctx context.Context, f store.JobFilter) ([]*store.Job, error) {
	var out []*store.Job
	f.Size = 1000
	for {
		items, next, err := s.store.ListJobs(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if next == "" {
			return out, nil
		}
		f.Token = next
	}
}

// GetExp returns the experiment with its jobs and artifact.
func (s *Server) GetExp(ctx context.Context, req *falconv1.GetExpRequest) (*falconv1.Experiment, error) {
	if err := checkID("id", ids.Experiment, req.GetId()); err != nil {
		return nil, err
	}
	return s.getExp(ctx, req.GetId())
}

func metricsFromAPI(ms []*falconv1.MetricSpec) []store.MetricSpec {
	var out []store.MetricSpec
	for _, m := range ms {
		out = append(out, store.MetricSpec{Name: m.GetName(), Pattern: m.GetPattern(), Better: m.GetBetter()})
	}
	return out
}

// artifactRootFor is where a new experiment's artifact goes: the bucket of
// the cluster it is pinned to, whose jobs write there (see
// artifactindex.Location), else the server's artifact root.
func (s *Server) artifactRootFor(ctx context.Context, cluster string) (blobstore.Location, error) {
	if cluster != "" {
		c, err := s.store.GetCluster(ctx, cluster)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return blobstore.Location{}, err
		}
		if c != nil && c.GCSBucket != "" {
			return blobstore.Location{Scheme: "gs", Bucket: c.GCSBucket}, nil
		}
	}
	return s.artifactRoot, nil
}

// ListExps lists experiments, newest first, one page at a time.
func (s *Server) ListExps(ctx context.Context, req *falconv1.ListExpsRequest) (*falconv1.ListExpsResponse, error) {
	status, err := normalizeStatus("status", req.GetStatus(), lifecycle.ExperimentMachine)
	if err != nil {
		return nil, err
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	name, prefix := strings.CutSuffix(req.GetName(), "*")
	if strings.Contains(name, "*") {
		return nil, errdefs.Invalid("name", "%q: only a trailing * is allowed (a name prefix, as in my-run*)", req.GetName())
	}
	if n := len(req.GetIds()); n > maxBatch {
		return nil, errdefs.Invalid("ids", "at most %d per call, got %d", maxBatch, n)
	}
	f := store.ExpFilter{
		IDs:         req.GetIds(),
		Page:        store.Page{Size: size, Token: req.GetPageToken()},
		ClusterName: req.GetClusterName(), Status: status,
		ExpType: req.GetExpType(), Creator: req.GetCreator(),
		Name: name, NamePrefix: prefix, Tags: req.GetTags(),
	}
	if f.Creator == "me" {
		// By user ID: the name an experiment shows is the one its creator
		// had then, and a service token's has no email at all.
		p, err := s.principal(ctx)
		if err != nil {
			return nil, err
		}
		f.Creator, f.CreatorID = "", p.UserID
	}
	items, next, err := s.store.ListExps(ctx, f)
	if err != nil {
		return nil, err
	}
	resp := &falconv1.ListExpsResponse{NextPageToken: next, Items: make([]*falconv1.Experiment, 0, len(items))}
	for _, e := range items {
		resp.Items = append(resp.Items, expToAPI(e))
	}
	return resp, nil
}

// AbortExp moves a live experiment and its live jobs to Aborting. Aborting
// an experiment that already ended (or is already aborting) changes nothing
// and says so. With force, the experiment and its jobs end Aborted at once.
func (s *Server) AbortExp(ctx context.Context, req *falconv1.AbortExpRequest) (*falconv1.AbortExpResponse, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkID("id", ids.Experiment, req.GetId()); err != nil {
		return nil, err
	}
	verb := "abort"
	if req.GetForce() {
		// First, so that the record of a refused force says so too.
		verb = "force-abort"
		noteAudit(ctx, "", "force=true")
	}
	if err := s.mayChange(ctx, p, req.GetId(), verb); err != nil {
		return nil, err
	}
	msg := "aborted by " + p.Display()
	if req.GetForce() {
		msg = "force-" + msg
	}
	if r := strings.TrimSpace(req.GetReason()); r != "" {
		msg += ": " + r
	}
	var exp *store.Experiment
	var changed bool
	done := "is aborting"
	if req.GetForce() {
		// For when the clusters will never confirm a stop (unreachable,
		// deleted, or an abort that hangs): the experiment and its jobs
		// end Aborted in one write. Nothing is asked of the clusters here:
		// the resource manager sees the jobs end under it and goes on
		// asking their clusters to stop them (leftovers), and every job's
		// Message says what may be left there until they confirm.
		exp, changed, err = s.store.ForceAbortExp(ctx, req.GetId(), msg,
			msg+"; the cluster never confirmed the stop: pods, processes or node pools it started may run until it does (the controller keeps asking)")
		done = "is aborted without waiting for its clusters; what they started may run until they confirm the stop, which the controller keeps asking for"
	} else {
		exp, changed, err = s.store.AbortExp(ctx, req.GetId(), msg)
	}
	if err != nil {
		return nil, err
	}
	noteAudit(ctx, "", fmt.Sprintf("changed=%t", changed))
	resp := &falconv1.AbortExpResponse{Changed: changed}
	if changed {
		s.changed(expWritten(exp.ID, exp.Status))
		s.log.Info("experiment aborting", "exp", exp.ID, "by", p.Display(), "force", req.GetForce())
		resp.Message = fmt.Sprintf("experiment %s %s", exp.ID, done)
	} else {
		resp.Message = fmt.Sprintf("experiment %s is already %s; nothing to abort", exp.ID, exp.Status)
	}
	if resp.Experiment, err = s.getExp(ctx, exp.ID); err != nil {
		return nil, err
	}
	return resp, nil
}

// DeleteExp removes a finished experiment, its jobs and its artifact record.
func (s *Server) DeleteExp(ctx context.Context, req *falconv1.DeleteExpRequest) (*falconv1.DeleteExpResponse, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkID("id", ids.Experiment, req.GetId()); err != nil {
		return nil, err
	}
	if err := s.mayChange(ctx, p, req.GetId(), "delete"); err != nil {
		return nil, err
	}
	if err := s.store.DeleteExp(ctx, req.GetId()); err != nil {
		return nil, err
	}
	s.changed(expChange(req.GetId()))
	return &falconv1.DeleteExpResponse{Id: req.GetId()}, nil
}

// mayChange lets only the experiment's creator, or an admin, change it.
// The refusal names the owner, so the caller knows whom to ask. An admin
// acting on someone else's experiment is noted in the audit log.
func (s *Server) mayChange(ctx context.Context, p auth.Principal, id, verb string) error {
	exp, err := s.store.GetExp(ctx, id)
	if err != nil {
		return err
	}
	if exp.CreatorID == p.UserID {
		return nil
	}
	owner := exp.Creator
	if owner == "" {
		owner = exp.CreatorID
	}
	if s.isAdmin(p) {
		noteAudit(ctx, "", "as admin; owner "+owner)
		return nil
	}
	return fmt.Errorf("%w: experiment %s belongs to %s; only its creator or an admin may %s it",
		errdefs.ErrPermissionDenied, id, owner, verb)
}

// UpdateExpStatus is the expController's write path.
func (s *Server) UpdateExpStatus(ctx context.Context, req *falconv1.UpdateExpStatusRequest) (*falconv1.Experiment, error) {
	u, err := statusUpdate(lifecycle.ExperimentMachine, req.GetId(), req.GetExpectedStatus(), req.GetStatus(), req.GetReason(), req.GetMessage(), req.GetStartedAt(), req.GetFinishedAt())
	if err != nil {
		return nil, err
	}
	exp, err := s.store.UpdateExpStatus(ctx, u)
	if err != nil {
		return nil, err
	}
	s.changed(derived(expWritten(exp.ID, exp.Status)))
	return expToAPI(exp), nil
}

// UpdateExpStatuses is the expController's write path for a whole cycle:
// every update in one transaction, each judged on its own.
func (s *Server) UpdateExpStatuses(ctx context.Context, req *falconv1.UpdateExpStatusesRequest) (*falconv1.UpdateExpStatusesResponse, error) {
	resp := &falconv1.UpdateExpStatusesResponse{Results: make([]*falconv1.ExpStatusResult, len(req.GetUpdates()))}
	var changes []changefeed.Change
	err := applyBatch(len(req.GetUpdates()),
		func(i int) (store.StatusUpdate, error) {
			r := req.GetUpdates()[i]
			return statusUpdate(lifecycle.ExperimentMachine, r.GetId(), r.GetExpectedStatus(), r.GetStatus(), r.GetReason(), r.GetMessage(), r.GetStartedAt(), r.GetFinishedAt())
		},
		func(us []store.StatusUpdate) ([]*store.Experiment, []error, error) {
			return s.store.UpdateExpStatuses(ctx, us)
		},
		func(i int, e *store.Experiment) {
			resp.Results[i] = &falconv1.ExpStatusResult{Experiment: expToAPI(e)}
			changes = append(changes, derived(expWritten(e.ID, e.Status)))
		},
		func(i int, err error) { resp.Results[i] = expRefusal(err) })
	if err != nil {
		return nil, err
	}
	if len(changes) > 0 {
		s.changed(changes...)
	}
	return resp, nil
}

// expRefusal is one refused update of a batch, coded as the call would be.
func expRefusal(err error) *falconv1.ExpStatusResult {
	r := refusal(err)
	return &falconv1.ExpStatusResult{Code: r.GetCode(), Message: r.GetMessage()}
}

// statusUpdate checks a status write's fields. started and finished are
// a start's and an end's own times (experiments and jobs only; nil for
// artifacts).
func statusUpdate(m lifecycle.Machine, id, expected, to, reason, msg string, started, finished *timestamppb.Timestamp) (store.StatusUpdate, error) {
	var errs errdefs.FieldErrors
	if id == "" {
		errs.Add("id", "is required")
	}
	timeOf := func(field string, ts *timestamppb.Timestamp) *time.Time {
		if ts == nil {
			return nil
		}
		if err := ts.CheckValid(); err != nil {
			errs.Add(field, "is not a valid time: %v", err)
			return nil
		}
		t := ts.AsTime()
		return &t
	}
	startedAt, finishedAt := timeOf("started_at", started), timeOf("finished_at", finished)
	from, err := normalizeStatus("expected_status", expected, m)
	if err != nil {
		if err := collect(&errs, err); err != nil {
			return store.StatusUpdate{}, err
		}
	} else if from == "" {
		errs.Add("expected_status", "is required: status updates are conditional on the status the caller read")
	}
	dest, err := normalizeStatus("status", to, m)
	if err != nil {
		if err := collect(&errs, err); err != nil {
			return store.StatusUpdate{}, err
		}
	} else if dest == "" {
		errs.Add("status", "is required")
	}
	if len(errs) > 0 {
		return store.StatusUpdate{}, errs
	}
	return store.StatusUpdate{ID: id, Expected: from, Status: dest, Reason: reason, Message: msg, StartedAt: startedAt, FinishedAt: finishedAt}, nil
}

// normalizeStatus accepts a status case-insensitively (scripts lower-case
// them) and returns its canonical name; empty stays empty.
func normalizeStatus(field, s string, m lifecycle.Machine) (lifecycle.Status, error) {
	if s == "" {
		return "", nil
	}
	statuses := m.Statuses()
	for _, st := range statuses {
		if strings.EqualFold(string(st), s) {
			return st, nil
		}
	}
	allowed := make([]string, len(statuses))
	for i, st := range statuses {
		allowed[i] = string(st)
	}
	return "", &errdefs.FieldError{Field: field, Detail: fmt.Sprintf("%q is not a %s status; allowed: %s", s, m.Kind, strings.Join(allowed, ", "))}
}

func pageSize(n int32) (int, error) {
	if n < 0 || n > 1000 {
		return 0, errdefs.Invalid("page_size", "must be between 0 (default 50) and 1000, got %d", n)
	}
	return int(n), nil
}

// idNoun names what an ID prefix identifies, for messages.
var idNoun = map[string]string{ids.Experiment: "experiment", ids.Job: "job", ids.Artifact: "artifact", ids.Cluster: "cluster"}

func checkID(field, prefix, id string) error {
	if id == "" {
		return errdefs.Invalid(field, "is required")
	}
	if !ids.Valid(prefix, id) {
		// A malformed ID cannot exist: report it as not found, naming the
		// expected shape so a typo is obvious.
		return errdefs.NotFoundf("%s %q not found: it does not look like an ID (%s followed by ten characters of [a-z0-9])", idNoun[prefix], id, prefix)
	}
	return nil
}

// created is the change of an experiment's creation. It is settled
// (falconv1.Change.settled) when the rows as created leave the
// expController nothing to do, by the same rule it applies
// (lifecycle.Propagate), and the experiment has no time-to-live, as the
// store settles a job's change: so a single-role experiment's creation
// is, and a multi-role one's is not (its message names the first role).
// Before, the expController read every new experiment with its jobs and
// artifacts: three calls for each create of BenchmarkKubeDispatch.
func created(exp *store.Experiment, jobs []*store.Job, art *store.Artifact) changefeed.Change {
	c := expChange(exp.ID)
	if exp.TTL > 0 || exp.IdleTTL > 0 || exp.ExpiresAt != nil {
		return c
	}
	js := make([]lifecycle.Entity, len(jobs))
	for i, j := range jobs {
		js[i] = lifecycle.Entity{ID: j.ID, Role: j.Role, Status: j.Status, Reason: j.Reason, Message: j.Message}
	}
	c.Settled = lifecycle.Propagate(
		lifecycle.Entity{ID: exp.ID, Status: exp.Status, Reason: exp.Reason, Message: exp.Message}, js,
		&lifecycle.Entity{ID: art.ID, Status: art.Status, Reason: art.Reason, Message: art.Message},
	).Empty()
	return c
}
