package stack

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/client-go/rest"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/probe"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/xpk"
)

// xpkCredentials is the process's one cache of xpk clusters' kubeconfigs
// (one file per cluster, fetched once: design 001's concurrency note),
// shared by the xpk backend, the scheduled probes and the server's probes
// on demand.
var xpkCredentials = sync.OnceValue(func() *xpk.Gcloud {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return &xpk.Gcloud{Dir: filepath.Join(dir, "falcon", "xpk-kubeconfigs")}
})

// newProber probes kubernetes and gke clusters with the credentials kc
// gives, and xpk clusters with xpk.
func newProber(kc apiserver.KubeConfigs) *probe.Prober {
	return probe.New(probe.WithKube(func(ctx context.Context, c *falconv1.Cluster) (*rest.Config, string, error) {
		return kc(ctx, &store.Cluster{Name: c.GetName(), Backend: c.GetBackend(), Project: c.GetProject(), Location: c.GetLocation(),
			Spec: store.ClusterSpec{Kubeconfig: c.GetKubeconfig(), KubeContext: c.GetKubeContext(), GKECluster: c.GetGkeCluster(), Namespace: c.GetNamespace()}})
	}), probe.WithXpk(xpk.New(), xpkCredentials()))
}
