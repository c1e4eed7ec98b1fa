package gke

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	compute "google.golang.org/api/compute/v1"
	container "google.golang.org/api/container/v1"
	"google.golang.org/api/option"
	"k8s.io/client-go/rest"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/placement"
	"github.com/falconhq/falcon/internal/provider/kube"
	"github.com/falconhq/falcon/internal/resourcemanager"
)

// BackendName is the value of a cluster's backend field for GKE clusters.
const BackendName = "gke"

// Clients are what the backend talks to Google with.
type Clients struct {
	Container *container.Service
	Compute   *compute.Service
	// Tokens authenticate calls to the clusters' apiservers. They must
	// refresh themselves: informers run for days.
	Tokens oauth2.TokenSource
}

// Connector makes the Clients on first use, so a controller with no GKE
// cluster registered never needs Google credentials.
type Connector func(ctx context.Context) (*Clients, error)

// ApplicationDefault connects with Application Default Credentials:
// Workload Identity when the controller runs in GKE, gcloud's login on a
// workstation. No key file or static kubeconfig is involved, and the
// credentials' token source refreshes before expiry.
func ApplicationDefault(ctx context.Context) (*Clients, error) {
	creds, err := google.FindDefaultCredentials(ctx, container.CloudPlatformScope)
	if err != nil {
		return nil, fmt.Errorf("gke: no Application Default Credentials (run in GKE with Workload Identity, or `gcloud auth application-default login`): %w", err)
	}
	cs, err := container.NewService(ctx, option.WithCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("gke: container API client: %w", err)
	}
	cp, err := compute.NewService(ctx, option.WithCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("gke: compute API client: %w", err)
	}
	return &Clients{Container: cs, Compute: cp, Tokens: creds.TokenSource}, nil
}

// Backend runs jobs on GKE clusters: node pools through the GKE and
// Compute APIs, Kubernetes Jobs through the kube backend connected to the
// endpoint clusters.get reports.
type Backend struct {
	*kube.Backend
	connect  Connector
	poolOpts []Option

	mu      sync.Mutex
	clients *Clients
	pools   *Manager
}

var _ resourcemanager.PoolBackend = (*Backend)(nil)

// NewBackend returns a Backend. kubeOpts configure its Kubernetes side
// (logger, change callback); poolOpts the pool manager.
func NewBackend(connect Connector, kubeOpts []kube.Option, poolOpts ...Option) *Backend {
	b := &Backend{connect: connect, poolOpts: poolOpts}
	b.Backend = kube.New(append(kubeOpts, kube.WithRESTConfig(b.restConfig))...)
	return b
}

func (b *Backend) connected(ctx context.Context) (*Clients, *Manager, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.clients == nil {
		c, err := b.connect(ctx)
		if err != nil {
			return nil, nil, err
		}
		b.clients, b.pools = c, New(c.Container, c.Compute, b.poolOpts...)
	}
	return b.clients, b.pools, nil
}

// ClusterOf is the GKE cluster a Falcon cluster row names.
func ClusterOf(c *falconv1.Cluster) Cluster {
	name := c.GetGkeCluster()
	if name == "" {
		name = c.GetName()
	}
	return Cluster{Project: c.GetProject(), Location: c.GetLocation(), Name: name, DefaultReservation: c.GetDefaultReservation()}
}

// RESTConfig is how the API server reaches a GKE cluster's apiserver to
// read its pods' logs: the same endpoint, CA and tokens as the jobs' own
// client.
func (b *Backend) RESTConfig(c *falconv1.Cluster) (*rest.Config, error) { return b.restConfig(c) }

// restConfig reaches the cluster's apiserver at the endpoint and CA that
// clusters.get reports, with a bearer token from the refreshing source.
func (b *Backend) restConfig(c *falconv1.Cluster) (*rest.Config, error) {
	ctx := context.Background()
	cl, _, err := b.connected(ctx)
	if err != nil {
		return nil, err
	}
	gc := ClusterOf(c)
	if gc.Project == "" || gc.Location == "" {
		return nil, fmt.Errorf("cluster %s: a gke cluster needs project and location", c.GetName())
	}
	got, err := cl.Container.Projects.Locations.Clusters.Get(gc.path()).Context(ctx).Do()
	if err != nil {
		return nil, fmt.Errorf("get GKE cluster %s: %s", gc.path(), apiMessage(err))
	}
	if got.Endpoint == "" || got.MasterAuth == nil {
		return nil, fmt.Errorf("GKE cluster %s has no endpoint yet (status %s)", gc.path(), got.Status)
	}
	ca, err := base64.StdEncoding.DecodeString(got.MasterAuth.ClusterCaCertificate)
	if err != nil {
		return nil, fmt.Errorf("GKE cluster %s: CA certificate: %w", gc.path(), err)
	}
	host := got.Endpoint
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	tokens := cl.Tokens
	return &rest.Config{
		Host:            host,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return &oauth2.Transport{Source: tokens, Base: rt}
		},
		QPS: kube.ClusterQPS, Burst: 2 * kube.ClusterQPS,
	}, nil
}

// NeedsPool implements resourcemanager.PoolBackend: TPU and GPU jobs get a
// pool of their own; CPU jobs run on the cluster's standing nodes.
func (b *Backend) NeedsPool(j *falconv1.Job) bool {
	spec, err := accelerator.Lookup(j.GetTaskSpec().GetDeviceType())
	return err != nil || spec.Kind != accelerator.KindCPU
}

// ProvisionPool implements resourcemanager.PoolBackend.
func (b *Backend) ProvisionPool(ctx context.Context, c *falconv1.Cluster, j *falconv1.Job) (resourcemanager.Provisioning, error) {
	_, pools, err := b.connected(ctx)
	if err != nil {
		return resourcemanager.Provisioning{}, err
	}
	ts := j.GetTaskSpec()
	sl, err := accelerator.Resolve(ts.GetDeviceType(), ts.GetDeviceTopo(), int(ts.GetReplica()), int(ts.GetDeviceCount()))
	if err != nil {
		return resourcemanager.Provisioning{}, &resourcemanager.PoolError{Reason: lifecycle.ReasonNodePoolFailed, Message: "no node pool fits the task: " + err.Error()}
	}
	r, err := pools.Ensure(ctx, Request{Cluster: ClusterOf(c), JobID: j.GetId(), SupplyMode: SupplyMode(ts.GetSupplyMode()), Slice: sl, Slices: placement.Slices(ts)})
	if err != nil {
		return resourcemanager.Provisioning{}, poolErr(err)
	}
	return resourcemanager.Provisioning{Pool: r.Pool, Reason: r.Reason, Message: r.Message}, nil
}

// CheckPool implements resourcemanager.PoolBackend; a pool group says how
// many of its slice pools are running.
func (b *Backend) CheckPool(ctx context.Context, c *falconv1.Cluster, pool string) (resourcemanager.PoolCheck, error) {
	_, pools, err := b.connected(ctx)
	if err != nil {
		return resourcemanager.PoolCheck{}, err
	}
	r, err := pools.Look(ctx, ClusterOf(c), pool)
	return resourcemanager.PoolCheck{Ready: r.Ready, Message: r.Message}, poolErr(err)
}

// ListPools implements resourcemanager.PoolBackend. The slice pools of a
// multi-slice job are listed as their group, one pool of the group's
// shape (placement.GroupShape).
func (b *Backend) ListPools(ctx context.Context, c *falconv1.Cluster) ([]resourcemanager.Pool, error) {
	_, pools, err := b.connected(ctx)
	if err != nil {
		return nil, err
	}
	infos, err := pools.ListFalconPools(ctx, ClusterOf(c))
	if err != nil {
		return nil, err
	}
	infos = groupPools(infos, pools.Refused(ClusterOf(c)))
	out := make([]resourcemanager.Pool, 0, len(infos))
	for _, p := range infos {
		topo := p.Labels[LabelTopology]
		if topo == "" {
			topo = p.Topology
		}
		topo = placement.GroupShape(topo, groupSize(p))
		out = append(out, resourcemanager.Pool{
			Name: p.Name, AcceleratorType: p.Labels[LabelAccelerator], Topology: topo, Nodes: p.Nodes,
			State: poolState(p.Status), Status: p.Status, SupplyMode: string(p.Mode),
			CreatedFor: p.JobID, CreatedAt: p.CreatedAt,
		})
	}
	return out, nil
}

// poolState maps GKE's node pool status.
func poolState(s string) lifecycle.PoolState {
	switch s {
	case "RUNNING", "RUNNING_WITH_ERROR":
		return lifecycle.PoolReady
	case "STOPPING":
		return lifecycle.PoolDeleting
	case "ERROR":
		return lifecycle.PoolFailed
	default: // PROVISIONING, RECONCILING (being changed), unknown
		return lifecycle.PoolProvisioning
	}
}

// DeletePool implements resourcemanager.PoolBackend.
func (b *Backend) DeletePool(ctx context.Context, c *falconv1.Cluster, pool string) error {
	_, pools, err := b.connected(ctx)
	if err != nil {
		return err
	}
	err = pools.Delete(ctx, ClusterOf(c), pool)
	if errors.Is(err, ErrBusy) {
		return fmt.Errorf("%w: %v", resourcemanager.ErrPoolBusy, err)
	}
	return err
}

// Reservation implements resourcemanager.PoolBackend.
func (b *Backend) Reservation(ctx context.Context, c *falconv1.Cluster) (*falconv1.ReservationCapacity, error) {
	if c.GetDefaultReservation() == "" {
		return nil, nil
	}
	_, pools, err := b.connected(ctx)
	if err != nil {
		return nil, err
	}
	path, count, inUse, err := pools.ReservationCapacity(ctx, ClusterOf(c))
	if err != nil {
		return nil, err
	}
	return &falconv1.ReservationCapacity{Name: path, Count: count, InUse: inUse, Free: count - inUse}, nil
}

// poolErr carries a pool failure's Reason over to the resource manager.
func poolErr(err error) error {
	var pe *PoolError
	if errors.As(err, &pe) {
		return &resourcemanager.PoolError{Reason: pe.Reason, Message: pe.Message}
	}
	return err
}
