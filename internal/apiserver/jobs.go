package apiserver

import (
	"context"
	"google.golang.org/protobuf/encoding/protojson"
	"log/slog"
	"slices"
	"strings"

	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/changefeed"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

// GetJob returns one job, with its experiment's config (the executor hands it
// to the job as CUSTOM_CONFIG_KEY).
func (s *Server) GetJob(ctx context.Context, req *falconv1.GetJobRequest) (*falconv1.Job, error) {
	if err := checkID("id", ids.Job, req.GetId()); err != nil {
		return nil, err
	}
	j, err := s.store.GetJob(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	out := jobToAPI(j)
	if exp, err := s.store.GetExp(ctx, j.ExpID); err == nil {
		out.Config = exp.Config
	}
	return out, nil
}

// ListJobs lists jobs oldest first, so controllers see submission order.
func (s *Server) ListJobs(ctx context.Context, req *falconv1.ListJobsRequest) (*falconv1.ListJobsResponse, error) {
	statuses, err := normalizeStatuses(req.GetStatuses(), lifecycle.JobMachine)
	if err != nil {
		return nil, err
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	if n := len(req.GetExpIds()); n > maxExpIDs {
		return nil, errdefs.Invalid("exp_ids", "at most %d experiments per call, got %d", maxExpIDs, n)
	}
	items, next, err := s.store.ListJobs(ctx, store.JobFilter{
		Page:  store.Page{Size: size, Token: req.GetPageToken()},
		ExpID: req.GetExpId(), ExpIDs: req.GetExpIds(), Statuses: statuses, ClusterName: req.GetClusterName(),
	})
	if err != nil {
		return nil, err
	}
	resp := &falconv1.ListJobsResponse{NextPageToken: next, Items: make([]*falconv1.Job, 0, len(items))}
	for _, j := range items {
		resp.Items = append(resp.Items, jobToAPI(j))
	}
	return resp, nil
}

// maxExpIDs bounds a list's exp_ids filter, which becomes one SQL IN (...).
const maxExpIDs = 1000

func normalizeStatuses(in []string, m lifecycle.Machine) ([]lifecycle.Status, error) {
	var out []lifecycle.Status
	for _, s := range in {
		st, err := normalizeStatus("statuses", s, m)
		if err != nil {
			return nil, err
		}
		if st != "" {
			out = append(out, st)
		}
	}
	return out, nil
}

// UpdateJobStatus is the resource manager's write path.
func (s *Server) UpdateJobStatus(ctx context.Context, req *falconv1.UpdateJobStatusRequest) (*falconv1.Job, error) {
	u, err := jobStatusUpdate(req)
	if err != nil {
		return nil, err
	}
	u.ClusterName = req.GetClusterName()
	u.NodePool = req.GetNodePool()
	// Through the batch write, so that the experiment follows the job in
	// the same transaction, as it does for a batch.
	jobs, errs, exps, err := s.store.UpdateJobStatuses(ctx, []store.StatusUpdate{u})
	if err != nil {
		return nil, err
	}
	if errs[0] != nil {
		return nil, errs[0]
	}
	s.changed(s.propagated([]changefeed.Change{statusWritten(ctx, jobs[0], u)}, exps)...)
	return jobToAPI(jobs[0]), nil
}

// statusWritten is the change of j's status write u, stamped with its
// writer. A write within Pending (a queue position, Next, Dispatching) is
// a mirror (falconv1.Change.mirror): most of the resource manager's
// writes, and each woke the expController to read the experiment, its
// jobs and its artifact, only to hold the mirror for a second.
func statusWritten(ctx context.Context, j *store.Job, u store.StatusUpdate) changefeed.Change {
	c := writtenBy(ctx, jobChange(j))
	c.Mirror = u.Expected == lifecycle.Pending && u.Status == lifecycle.Pending
	return c
}

// propagated completes the job changes of a write with what the write did
// to their experiments (store.ExpChange): a job change is settled when its
// experiment was left with nothing for the expController, and each
// experiment the write changed is logged and gets a change of its own,
// derived, as the expController's own would be, since the job changes it
// follows from are on the feed with it. As for jobs, a change of status
// is an event (info); a mirrored Reason or Message within one, such as a
// queue position, is progress (debug).
func (s *Server) propagated(jobs []changefeed.Change, exps []store.ExpChange) []changefeed.Change {
	settled := make(map[string]bool, len(exps))
	var out []changefeed.Change
	for _, c := range exps {
		settled[c.ID] = c.Settled
		if !c.Changed {
			continue
		}
		level := slog.LevelDebug
		if c.From != c.Status {
			level = slog.LevelInfo
		}
		s.log.Log(context.Background(), level, "experiment status", "exp", c.ID, "exp_name", c.Name, "cluster", c.ClusterName,
			"from", c.From, "to", c.Status, "reason", c.Reason)
		out = append(out, derived(expWritten(c.ID, c.Status)))
	}
	for i := range jobs {
		jobs[i].Settled = settled[jobs[i].ExpID]
	}
	return append(jobs, out...)
}

// jobStatusUpdate checks one job status update: the status move, and that
// its Reason is one the target status carries.
func jobStatusUpdate(r *falconv1.UpdateJobStatusRequest) (store.StatusUpdate, error) {
	u, err := statusUpdate(lifecycle.JobMachine, r.GetId(), r.GetExpectedStatus(), r.GetStatus(), r.GetReason(), r.GetMessage(), r.GetStartedAt(), r.GetFinishedAt())
	if err != nil {
		return u, err
	}
	if sel := r.GetSelection(); sel != nil {
		b, err := protojson.Marshal(sel)
		if err != nil {
			return u, errdefs.Invalid("selection", "cannot be encoded: %v", err)
		}
		u.Selection = string(b)
	}
	return u, checkJobReason(u.Status, u.Reason)
}

// checkJobReason holds a job's Reason to its vocabulary (000 section 9):
// set only while Pending (what is happening now) or when Failed (why),
// empty for every other status. Empty is always allowed. A Reason outside
// the vocabulary would reach users, dashboards and the experiment's own
// Reason as if it were one of the documented ones.
func checkJobReason(st lifecycle.Status, reason string) error {
	if reason == "" {
		return nil
	}
	var allowed []lifecycle.Reason
	switch st {
	case lifecycle.Pending:
		allowed = lifecycle.PendingReasons
	case lifecycle.Failed:
		allowed = lifecycle.FailedReasons
	}
	if slices.Contains(allowed, lifecycle.Reason(reason)) {
		return nil
	}
	if len(allowed) == 0 {
		return errdefs.Invalid("reason", "must be empty for status %s, got %q: a job's Reason is set only when %s (%s) or %s (%s)",
			st, reason, lifecycle.Pending, joinReasons(lifecycle.PendingReasons), lifecycle.Failed, joinReasons(lifecycle.FailedReasons))
	}
	return errdefs.Invalid("reason", "%q is not a reason of a %s job; allowed: %s (or empty)", reason, st, joinReasons(allowed))
}

func joinReasons(rs []lifecycle.Reason) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return strings.Join(out, ", ")
}

// maxBatch bounds UpdateJobStatuses: one transaction must stay short.
const maxBatch = 1000

// UpdateJobStatuses applies many status updates in one transaction; each is
// judged on its own, and its refusal comes back in its result.
func (s *Server) UpdateJobStatuses(ctx context.Context, req *falconv1.UpdateJobStatusesRequest) (*falconv1.UpdateJobStatusesResponse, error) {
	resp := &falconv1.UpdateJobStatusesResponse{Results: make([]*falconv1.JobStatusResult, len(req.GetUpdates()))}
	var changes []changefeed.Change
	var exps []store.ExpChange
	us := make([]store.StatusUpdate, len(req.GetUpdates()))
	err := applyBatch(len(req.GetUpdates()),
		func(i int) (store.StatusUpdate, error) {
			r := req.GetUpdates()[i]
			u, err := jobStatusUpdate(r)
			u.ClusterName, u.NodePool = r.GetClusterName(), r.GetNodePool()
			us[i] = u
			return u, err
		},
		func(us []store.StatusUpdate) (jobs []*store.Job, errs []error, err error) {
			jobs, errs, exps, err = s.store.UpdateJobStatuses(ctx, us)
			return jobs, errs, err
		},
		func(i int, j *store.Job) {
			resp.Results[i] = &falconv1.JobStatusResult{Job: jobToAPI(j)}
			changes = append(changes, statusWritten(ctx, j, us[i]))
		},
		func(i int, err error) { resp.Results[i] = refusal(err) })
	if err != nil {
		return nil, err
	}
	s.addConfigs(ctx, req, resp.Results)
	changes = s.propagated(changes, exps)
	if len(changes) > 0 {
		s.changed(changes...)
	}
	return resp, nil
}

// applyBatch is the shape of every batch status write: the n requests are
// checked one by one (a refusal is that request's result), the valid ones
// applied in one store transaction, and each written row handed to done by
// its index in the request. Only the store's failure fails the call.
func applyBatch[Row any](n int, check func(i int) (store.StatusUpdate, error),
	apply func([]store.StatusUpdate) ([]Row, []error, error), done func(i int, row Row), refused func(i int, err error)) error {
	if n > maxBatch {
		return errdefs.Invalid("updates", "at most %d per call, got %d", maxBatch, n)
	}
	var us []store.StatusUpdate
	var at []int // index in the request of each entry of us
	for i := range n {
		u, err := check(i)
		if err != nil {
			refused(i, err)
			continue
		}
		us = append(us, u)
		at = append(at, i)
	}
	rows, errs, err := apply(us)
	if err != nil {
		return err
	}
	for k, i := range at {
		if errs[k] != nil {
			refused(i, errs[k])
			continue
		}
		done(i, rows[k])
	}
	return nil
}

// addConfigs sets the Config of each written job that asked for it (the
// call's with_config, or the update's) to its experiment's, read once per
// experiment. A config that cannot be read is left empty, as GetJob
// leaves it, and the caller reads it again.
func (s *Server) addConfigs(ctx context.Context, req *falconv1.UpdateJobStatusesRequest, results []*falconv1.JobStatusResult) {
	configs := map[string]string{}
	for i, r := range results {
		j := r.GetJob()
		if j == nil || !req.GetWithConfig() && !req.GetUpdates()[i].GetWithConfig() {
			continue
		}
		c, ok := configs[j.GetExpId()]
		if !ok {
			if exp, err := s.store.GetExp(ctx, j.GetExpId()); err == nil {
				c = exp.Config
			}
			configs[j.GetExpId()] = c
		}
		j.Config = c
	}
}

// refusal is one refused update of a batch, coded as the call would be.
func refusal(err error) *falconv1.JobStatusResult {
	st := status.Convert(errdefs.ToStatus(err))
	return &falconv1.JobStatusResult{Code: int32(st.Code()), Message: st.Message()}
}

// AppendJobMessage adds a note to a job's Message, whatever its status.
func (s *Server) AppendJobMessage(ctx context.Context, req *falconv1.AppendJobMessageRequest) (*falconv1.Job, error) {
	if err := checkID("id", ids.Job, req.GetId()); err != nil {
		return nil, err
	}
	j, err := s.store.AppendJobMessage(ctx, req.GetId(), req.GetNote())
	if err != nil {
		return nil, err
	}
	s.changed(jobChange(j))
	return jobToAPI(j), nil
}

// AbortJob moves one live job to Aborting. The expController uses it to stop
// the other roles of an experiment whose role failed.
func (s *Server) AbortJob(ctx context.Context, req *falconv1.AbortJobRequest) (*falconv1.Job, error) {
	if err := checkID("id", ids.Job, req.GetId()); err != nil {
		return nil, err
	}
	if err := checkJobReason(lifecycle.Aborting, req.GetReason()); err != nil {
		return nil, err
	}
	j, err := s.store.GetJob(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	if j.Status != lifecycle.Pending && j.Status != lifecycle.Running {
		return jobToAPI(j), nil // already ending or ended: nothing to do
	}
	j, err = s.store.UpdateJobStatus(ctx, store.StatusUpdate{
		ID: j.ID, Expected: j.Status, Status: lifecycle.Aborting,
		Reason: req.GetReason(), Message: req.GetMessage(),
	})
	if err != nil {
		return nil, err
	}
	s.changed(writtenBy(ctx, jobChange(j)))
	return jobToAPI(j), nil
}

// WatchChanges streams every change this server writes, numbered. It
// starts with a hello (kind "") carrying the epoch and the latest seq; a
// watcher that names this server's epoch and a seq it still holds gets the
// changes it missed first, anyone else a "resync". Changes written through
// another server replica reach this feed through FollowReplicas, which
// tails the events the other replicas wrote (within WithReplicaPoll);
// changes that leave no event (clusters, artifacts) do not, and watchers
// resynchronise periodically for those (see internal/controller/watch).
func (s *Server) WatchChanges(req *falconv1.WatchChangesRequest, stream falconv1.JobService_WatchChangesServer) error {
	ch, cancel := s.feed.Subscribe()
	defer cancel()
	epoch := s.feed.Epoch()
	cursor := s.feed.Latest()
	if err := stream.Send(&falconv1.Change{Epoch: epoch, Seq: cursor}); err != nil {
		return err
	}
	if req.GetEpoch() == epoch {
		cursor = req.GetSince()
	} else if req.GetEpoch() != "" || req.GetSince() != 0 {
		if err := stream.Send(&falconv1.Change{Kind: "resync", Epoch: epoch, Seq: cursor}); err != nil {
			return err
		}
	}
	for {
		changes, ok := s.feed.Since(cursor)
		if !ok {
			// Fell behind what the feed holds (or named a seq it never
			// gave): the watcher must read everything again.
			cursor = s.feed.Latest()
			if err := stream.Send(&falconv1.Change{Kind: "resync", Epoch: epoch, Seq: cursor}); err != nil {
				return err
			}
		}
		for _, c := range changes {
			if err := stream.Send(&falconv1.Change{Kind: c.Kind, Id: c.ID, ExpId: c.ExpID, Seq: c.Seq, Epoch: epoch, Derived: c.Derived, Writer: c.Writer, Settled: c.Settled, Mirror: c.Mirror}); err != nil {
				return err
			}
			cursor = c.Seq
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-ch:
		}
	}
}

// GetArtifact returns one artifact.
func (s *Server) GetArtifact(ctx context.Context, req *falconv1.GetArtifactRequest) (*falconv1.Artifact, error) {
	if err := checkID("id", ids.Artifact, req.GetId()); err != nil {
		return nil, err
	}
	a, err := s.store.GetArtifact(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return artifactToAPI(a), nil
}

// ListArtifacts lists artifacts oldest first.
func (s *Server) ListArtifacts(ctx context.Context, req *falconv1.ListArtifactsRequest) (*falconv1.ListArtifactsResponse, error) {
	statuses, err := normalizeStatuses(req.GetStatuses(), lifecycle.ArtifactMachine)
	if err != nil {
		return nil, err
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	if n := len(req.GetExpIds()); n > maxExpIDs {
		return nil, errdefs.Invalid("exp_ids", "at most %d experiments per call, got %d", maxExpIDs, n)
	}
	items, next, err := s.store.ListArtifacts(ctx, store.ArtifactFilter{
		Page: store.Page{Size: size, Token: req.GetPageToken()}, ExpID: req.GetExpId(), ExpIDs: req.GetExpIds(), Statuses: statuses,
	})
	if err != nil {
		return nil, err
	}
	resp := &falconv1.ListArtifactsResponse{NextPageToken: next, Items: make([]*falconv1.Artifact, 0, len(items))}
	for _, a := range items {
		resp.Items = append(resp.Items, artifactToAPI(a))
	}
	return resp, nil
}

// UpdateArtifactStatus is the expController's write path for artifacts.
func (s *Server) UpdateArtifactStatus(ctx context.Context, req *falconv1.UpdateArtifactStatusRequest) (*falconv1.Artifact, error) {
	u, err := statusUpdate(lifecycle.ArtifactMachine, req.GetId(), req.GetExpectedStatus(), req.GetStatus(), req.GetReason(), req.GetMessage(), nil, nil)
	if err != nil {
		return nil, err
	}
	a, err := s.store.UpdateArtifactStatus(ctx, u)
	if err != nil {
		return nil, err
	}
	s.changed(artChange(a))
	return artifactToAPI(a), nil
}

// UpdateArtifactStatuses is the expController's batch write path for
// artifacts: one transaction, each update under its own precondition.
func (s *Server) UpdateArtifactStatuses(ctx context.Context, req *falconv1.UpdateArtifactStatusesRequest) (*falconv1.UpdateArtifactStatusesResponse, error) {
	resp := &falconv1.UpdateArtifactStatusesResponse{Results: make([]*falconv1.ArtifactStatusResult, len(req.GetUpdates()))}
	var changes []changefeed.Change
	err := applyBatch(len(req.GetUpdates()),
		func(i int) (store.StatusUpdate, error) {
			r := req.GetUpdates()[i]
			return statusUpdate(lifecycle.ArtifactMachine, r.GetId(), r.GetExpectedStatus(), r.GetStatus(), r.GetReason(), r.GetMessage(), nil, nil)
		},
		func(us []store.StatusUpdate) ([]*store.Artifact, []error, error) {
			return s.store.UpdateArtifactStatuses(ctx, us)
		},
		func(i int, a *store.Artifact) {
			resp.Results[i] = &falconv1.ArtifactStatusResult{Artifact: artifactToAPI(a)}
			changes = append(changes, artChange(a))
		},
		func(i int, err error) {
			r := refusal(err)
			resp.Results[i] = &falconv1.ArtifactStatusResult{Code: r.GetCode(), Message: r.GetMessage()}
		})
	if err != nil {
		return nil, err
	}
	if len(changes) > 0 {
		s.changed(changes...)
	}
	return resp, nil
}
