package apiserver

import (
	"context"
	"regexp"
	"slices"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/store"
)

// Cluster backends Falcon can drive.
var clusterBackends = []string{"local"}

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

// ListClusters lists every registered cluster.
func (s *Server) ListClusters(ctx context.Context, _ *falconv1.ListClustersRequest) (*falconv1.ListClustersResponse, error) {
	cs, err := s.store.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	resp := &falconv1.ListClustersResponse{Items: make([]*falconv1.Cluster, 0, len(cs))}
	for _, c := range cs {
		resp.Items = append(resp.Items, clusterToAPI(c))
	}
	return resp, nil
}

// RegisterCluster creates or updates a cluster by name.
func (s *Server) RegisterCluster(ctx context.Context, req *falconv1.RegisterClusterRequest) (*falconv1.Cluster, error) {
	in := req.GetCluster()
	var errs errdefs.FieldErrors
	if n := in.GetName(); n == "" || len(n) > 63 || !dnsLabel.MatchString(n) {
		errs.Add("cluster.name", "%q must be a DNS-1123 label", n)
	}
	if !contains(clusterBackends, in.GetBackend()) {
		errs.Add("cluster.backend", "%q is not a backend; allowed: %v", in.GetBackend(), clusterBackends)
	}
	st := in.GetStatus()
	if st == "" {
		st = store.ClusterActive
	}
	if !contains([]string{store.ClusterActive, store.ClusterMaintenance, store.ClusterOffline}, st) {
		errs.Add("cluster.status", "%q is not allowed; use active, maintenance or offline", st)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	c, err := s.store.UpsertCluster(ctx, &store.Cluster{
		ID: ids.New(ids.Cluster), Name: in.GetName(), Backend: in.GetBackend(),
		Project: in.GetProject(), Location: in.GetLocation(), AcceleratorTypes: in.GetAcceleratorTypes(),
		GCSBucket: in.GetGcsBucket(), DefaultReservation: in.GetDefaultReservation(),
		Status: st, CreatedAt: s.now(),
	})
	if err != nil {
		return nil, err
	}
	s.changed()
	return clusterToAPI(c), nil
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func contains(xs []string, x string) bool { return slices.Contains(xs, x) }
