package stack

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/provider/gke"
	"github.com/falconhq/falcon/internal/provider/kube"
	"github.com/falconhq/falcon/internal/store"
)

// serverKubeQPS is the API server's request rate to one cluster's
// apiserver (pod lookups for exec, pod logs).
const serverKubeQPS = 50

// kubeClients gives the API server one client per cluster for reading pod
// logs and finding pods to exec into, built on kubeConfigs.
func kubeClients(configs apiserver.KubeConfigs) apiserver.KubeClients {
	var mu sync.Mutex
	cache := map[*rest.Config]kubernetes.Interface{}
	return func(ctx context.Context, c *store.Cluster) (kubernetes.Interface, string, error) {
		cfg, ns, err := configs(ctx, c)
		if err != nil {
			return nil, "", err
		}
		mu.Lock()
		defer mu.Unlock()
		if cl, ok := cache[cfg]; ok {
			return cl, ns, nil
		}
		// client-go's default of 5 requests a second (burst 10) made the
		// eleventh exec in a second wait 200 ms for its pod lookup: the
		// server reads for every user of the cluster.
		lc := rest.CopyConfig(cfg)
		lc.QPS, lc.Burst = serverKubeQPS, 2*serverKubeQPS
		cl, err := kubernetes.NewForConfig(lc)
		if err != nil {
			return nil, "", fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		cache[cfg] = cl
		return cl, ns, nil
	}
}

// kubeConfigs gives the API server one REST config per cluster: through
// the cluster's kubeconfig context (kubernetes backend) or the endpoint the
// GKE API reports (gke, when connect is set). Configs are kept: building
// one reads files or calls the GKE API; a GKE config's token source
// refreshes itself.
func kubeConfigs(connect gke.Connector) apiserver.KubeConfigs {
	var gb *gke.Backend
	if connect != nil {
		gb = gke.NewBackend(connect, nil)
	}
	var mu sync.Mutex
	cache := map[string]*rest.Config{}
	return func(_ context.Context, c *store.Cluster) (*rest.Config, string, error) {
		pc := &falconv1.Cluster{
			Name: c.Name, Backend: c.Backend, Project: c.Project, Location: c.Location,
			Kubeconfig: c.Spec.Kubeconfig, KubeContext: c.Spec.KubeContext, GkeCluster: c.Spec.GKECluster, Namespace: c.Spec.Namespace,
		}
		ns := c.Spec.Namespace
		if ns == "" {
			ns = "default"
		}
		key := strings.Join([]string{c.Backend, c.Name, c.Spec.Kubeconfig, c.Spec.KubeContext, c.Project, c.Location, c.Spec.GKECluster}, "\x00")
		mu.Lock()
		defer mu.Unlock()
		if cfg, ok := cache[key]; ok {
			return cfg, ns, nil
		}
		var cfg *rest.Config
		var err error
		switch {
		case c.Backend == kube.BackendName:
			cfg, err = kube.KubeconfigREST(pc)
		case c.Backend == gke.BackendName && gb != nil:
			cfg, err = gb.RESTConfig(pc)
		default:
			return nil, "", errdefs.Precondition("the server has no credentials for %s cluster %s", c.Backend, c.Name)
		}
		if err != nil {
			return nil, "", errdefs.Unavailable("cluster %s: %v", c.Name, err)
		}
		cache[key] = cfg
		return cfg, ns, nil
	}
}
