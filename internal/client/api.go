package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// The methods below mirror the public RPCs of api/falcon/v1 one to one, over
// the HTTP routes of gateway.yaml.

// CreateExp creates an experiment, or with ValidateOnly only checks it and
// returns what would be created.
func (c *Client) CreateExp(ctx context.Context, req *falconv1.CreateExpRequest) (*falconv1.Experiment, error) {
	out := new(falconv1.Experiment)
	return out, c.do(ctx, http.MethodPost, "/v1/experiments", nil, req, out)
}

// GetExp returns an experiment with its jobs and artifact.
func (c *Client) GetExp(ctx context.Context, req *falconv1.GetExpRequest) (*falconv1.Experiment, error) {
	out := new(falconv1.Experiment)
	return out, c.do(ctx, http.MethodGet, idPath("/v1/experiments", req.GetId()), nil, nil, out)
}

// ListExps returns one page of experiments.
func (c *Client) ListExps(ctx context.Context, req *falconv1.ListExpsRequest) (*falconv1.ListExpsResponse, error) {
	q := url.Values{}
	setInt(q, "page_size", req.GetPageSize())
	setString(q, "page_token", req.GetPageToken())
	setString(q, "cluster_name", req.GetClusterName())
	setString(q, "status", req.GetStatus())
	setString(q, "exp_type", req.GetExpType())
	setString(q, "creator", req.GetCreator())
	setString(q, "name", req.GetName())
	for _, t := range req.GetTags() {
		q.Add("tags", t)
	}
	out := new(falconv1.ListExpsResponse)
	return out, c.do(ctx, http.MethodGet, "/v1/experiments", q, nil, out)
}

// AbortExp aborts an experiment. Aborting one that already ended is not an
// error: the response says Changed=false.
func (c *Client) AbortExp(ctx context.Context, req *falconv1.AbortExpRequest) (*falconv1.AbortExpResponse, error) {
	out := new(falconv1.AbortExpResponse)
	return out, c.do(ctx, http.MethodPost, idPath("/v1/experiments", req.GetId())+":abort", nil, req, out)
}

// ExtendExp sets the time an experiment has left.
func (c *Client) ExtendExp(ctx context.Context, req *falconv1.ExtendExpRequest) (*falconv1.Experiment, error) {
	out := new(falconv1.Experiment)
	return out, c.do(ctx, http.MethodPost, idPath("/v1/experiments", req.GetId())+":extend", nil, req, out)
}

// DeleteExp deletes an experiment.
func (c *Client) DeleteExp(ctx context.Context, req *falconv1.DeleteExpRequest) (*falconv1.DeleteExpResponse, error) {
	out := new(falconv1.DeleteExpResponse)
	return out, c.do(ctx, http.MethodDelete, idPath("/v1/experiments", req.GetId()), nil, nil, out)
}

// GetJob returns a job.
func (c *Client) GetJob(ctx context.Context, req *falconv1.GetJobRequest) (*falconv1.Job, error) {
	out := new(falconv1.Job)
	return out, c.do(ctx, http.MethodGet, idPath("/v1/jobs", req.GetId()), nil, nil, out)
}

// ListJobs returns one page of jobs.
func (c *Client) ListJobs(ctx context.Context, req *falconv1.ListJobsRequest) (*falconv1.ListJobsResponse, error) {
	q := url.Values{}
	setInt(q, "page_size", req.GetPageSize())
	setString(q, "page_token", req.GetPageToken())
	setString(q, "exp_id", req.GetExpId())
	for _, s := range req.GetStatuses() {
		q.Add("statuses", s)
	}
	setString(q, "cluster_name", req.GetClusterName())
	out := new(falconv1.ListJobsResponse)
	return out, c.do(ctx, http.MethodGet, "/v1/jobs", q, nil, out)
}

// ListJobHistory returns one page of every user's jobs created since
// req.Since, oldest first (admins only).
func (c *Client) ListJobHistory(ctx context.Context, req *falconv1.ListJobHistoryRequest) (*falconv1.ListJobsResponse, error) {
	q := url.Values{}
	setInt(q, "page_size", req.GetPageSize())
	setString(q, "page_token", req.GetPageToken())
	if req.GetSince() != nil {
		q.Set("since", req.GetSince().AsTime().UTC().Format(time.RFC3339Nano))
	}
	out := new(falconv1.ListJobsResponse)
	return out, c.do(ctx, http.MethodGet, "/v1/jobs:history", q, nil, out)
}

// GetArtifact returns an artifact.
func (c *Client) GetArtifact(ctx context.Context, req *falconv1.GetArtifactRequest) (*falconv1.Artifact, error) {
	out := new(falconv1.Artifact)
	return out, c.do(ctx, http.MethodGet, idPath("/v1/artifacts", req.GetId()), nil, nil, out)
}

// ListArtifacts returns one page of artifacts.
func (c *Client) ListArtifacts(ctx context.Context, req *falconv1.ListArtifactsRequest) (*falconv1.ListArtifactsResponse, error) {
	q := url.Values{}
	setInt(q, "page_size", req.GetPageSize())
	setString(q, "page_token", req.GetPageToken())
	setString(q, "exp_id", req.GetExpId())
	for _, s := range req.GetStatuses() {
		q.Add("statuses", s)
	}
	out := new(falconv1.ListArtifactsResponse)
	return out, c.do(ctx, http.MethodGet, "/v1/artifacts", q, nil, out)
}

// GetCluster returns a cluster by name or ID.
func (c *Client) GetCluster(ctx context.Context, req *falconv1.GetClusterRequest) (*falconv1.Cluster, error) {
	out := new(falconv1.Cluster)
	return out, c.do(ctx, http.MethodGet, idPath("/v1/clusters", req.GetName()), nil, nil, out)
}

// ListClusters returns every registered cluster.
func (c *Client) ListClusters(ctx context.Context, _ *falconv1.ListClustersRequest) (*falconv1.ListClustersResponse, error) {
	out := new(falconv1.ListClustersResponse)
	return out, c.do(ctx, http.MethodGet, "/v1/clusters", nil, nil, out)
}

// RegisterCluster creates a cluster, or updates the one with the same name.
func (c *Client) RegisterCluster(ctx context.Context, req *falconv1.RegisterClusterRequest) (*falconv1.Cluster, error) {
	body := req.GetCluster()
	if body == nil {
		body = &falconv1.Cluster{} // the server answers that the cluster is required
	}
	out := new(falconv1.Cluster)
	return out, c.do(ctx, http.MethodPost, "/v1/clusters", nil, body, out)
}

// ApplyClusters converges the registry to a whole file's worth of clusters.
func (c *Client) ApplyClusters(ctx context.Context, req *falconv1.ApplyClustersRequest) (*falconv1.ApplyClustersResponse, error) {
	out := new(falconv1.ApplyClustersResponse)
	return out, c.do(ctx, http.MethodPost, "/v1/clusters:apply", nil, req, out)
}

// SetClusterStatus moves a cluster to active, maintenance or offline.
func (c *Client) SetClusterStatus(ctx context.Context, req *falconv1.SetClusterStatusRequest) (*falconv1.Cluster, error) {
	out := new(falconv1.Cluster)
	return out, c.do(ctx, http.MethodPost, idPath("/v1/clusters", req.GetName())+":setStatus", nil, req, out)
}

// GetClusterStatus returns what the resource manager last reported of a
// cluster: its reservation, node pools and queues.
func (c *Client) GetClusterStatus(ctx context.Context, req *falconv1.GetClusterStatusRequest) (*falconv1.ClusterStatus, error) {
	out := new(falconv1.ClusterStatus)
	return out, c.do(ctx, http.MethodGet, idPath("/v1/clusters", req.GetName())+"/status", nil, nil, out)
}

// ListClusterProbes returns the last health probe of every probed cluster.
func (c *Client) ListClusterProbes(ctx context.Context, _ *falconv1.ListClusterProbesRequest) (*falconv1.ListClusterProbesResponse, error) {
	out := new(falconv1.ListClusterProbesResponse)
	return out, c.do(ctx, http.MethodGet, "/v1/clusters:probes", nil, nil, out)
}

// ProbeClusters probes the named clusters (every active one when none is
// named) now, and returns the results.
func (c *Client) ProbeClusters(ctx context.Context, req *falconv1.ProbeClustersRequest) (*falconv1.ListClusterProbesResponse, error) {
	out := new(falconv1.ListClusterProbesResponse)
	return out, c.do(ctx, http.MethodPost, "/v1/clusters:probe", nil, req, out)
}

// GetCurrentUser returns the caller as the server sees it.
func (c *Client) GetCurrentUser(ctx context.Context, _ *falconv1.GetCurrentUserRequest) (*falconv1.User, error) {
	out := new(falconv1.User)
	return out, c.do(ctx, http.MethodGet, "/v1/users/me", nil, nil, out)
}

// ListUsers returns every registered user (admins only).
func (c *Client) ListUsers(ctx context.Context, _ *falconv1.ListUsersRequest) (*falconv1.ListUsersResponse, error) {
	out := new(falconv1.ListUsersResponse)
	return out, c.do(ctx, http.MethodGet, "/v1/users", nil, nil, out)
}

// RelinkUser moves the user registered with an email to a new Cloudflare
// identity (admins only).
func (c *Client) RelinkUser(ctx context.Context, req *falconv1.RelinkUserRequest) (*falconv1.RelinkUserResponse, error) {
	out := new(falconv1.RelinkUserResponse)
	return out, c.do(ctx, http.MethodPost, "/v1/users:relink", nil, req, out)
}

// ListAuditEvents returns one page of the audit log, newest first (admins only).
func (c *Client) ListAuditEvents(ctx context.Context, req *falconv1.ListAuditEventsRequest) (*falconv1.ListAuditEventsResponse, error) {
	q := url.Values{}
	setInt(q, "page_size", req.GetPageSize())
	setString(q, "page_token", req.GetPageToken())
	setString(q, "exp_id", req.GetExpId())
	setString(q, "actor", req.GetActor())
	setString(q, "method", req.GetMethod())
	out := new(falconv1.ListAuditEventsResponse)
	return out, c.do(ctx, http.MethodGet, "/v1/audit", q, nil, out)
}

// CreateAnalysis queues an analysis.
func (c *Client) CreateAnalysis(ctx context.Context, req *falconv1.CreateAnalysisRequest) (*falconv1.Analysis, error) {
	out := new(falconv1.Analysis)
	return out, c.do(ctx, http.MethodPost, "/v1/analyses", nil, req, out)
}

// GetAnalysis returns an analysis.
func (c *Client) GetAnalysis(ctx context.Context, req *falconv1.GetAnalysisRequest) (*falconv1.Analysis, error) {
	out := new(falconv1.Analysis)
	return out, c.do(ctx, http.MethodGet, idPath("/v1/analyses", req.GetId()), nil, nil, out)
}

// ListAnalyses returns an experiment's analyses.
func (c *Client) ListAnalyses(ctx context.Context, req *falconv1.ListAnalysesRequest) (*falconv1.ListAnalysesResponse, error) {
	q := url.Values{}
	setString(q, "exp_id", req.GetExpId())
	out := new(falconv1.ListAnalysesResponse)
	return out, c.do(ctx, http.MethodGet, "/v1/analyses", q, nil, out)
}
