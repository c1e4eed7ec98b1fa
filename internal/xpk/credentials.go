package xpk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// FromAPI is the manager's view of a registered xpk cluster.
func FromAPI(c *falconv1.Cluster) Cluster {
	return Cluster{
		Name: c.GetName(), ClusterID: c.GetGkeCluster(), Project: c.GetProject(), Zone: c.GetLocation(),
		DefaultNamespace: c.GetNamespace(), Path: c.GetXpkPath(),
	}
}

// Credentials prepares what xpk needs to reach a cluster and returns it as
// environment for xpk's runs (Cluster.Env).
type Credentials interface {
	Env(ctx context.Context, c Cluster) ([]string, error)
}

// Static gives every cluster the same environment: tests, and hosts whose
// credentials are set up outside Falcon.
type Static []string

// Env implements Credentials.
func (s Static) Env(context.Context, Cluster) ([]string, error) { return s, nil }

// Gcloud prepares a kubeconfig of its own for each cluster, once, with
// `gcloud container clusters get-credentials` (design 001's concurrency
// note): xpk fetches credentials into $KUBECONFIG on every run, and many
// runs at once against one ~/.kube/config race each other and hit the
// API's rate limits. With a file per cluster, prepared before the first
// probe, parallel runs of different clusters never share a file, and a
// cluster's own runs find its credentials already there.
//
// A failed preparation is retried at most every RetryAfter; meanwhile Env
// returns the failure.
type Gcloud struct {
	Dir        string // kubeconfigs are written here, one per cluster
	GcloudPath string // empty: gcloud on PATH
	Runner     Runner // empty: os/exec
	RetryAfter time.Duration
	Now        func() time.Time

	mu    sync.Mutex
	cache map[string]*prepared
}

type prepared struct {
	once   chan struct{} // closed when the attempt ended
	env    []string
	err    error
	failed time.Time
}

var _ Credentials = (*Gcloud)(nil)

// Env implements Credentials: KUBECONFIG pointing at the cluster's own
// file, prepared on first use (concurrent first uses share one gcloud run).
func (g *Gcloud) Env(ctx context.Context, c Cluster) ([]string, error) {
	key := strings.Join([]string{c.Project, c.Zone, c.ClusterID}, "/")
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	g.mu.Lock()
	if g.cache == nil {
		g.cache = map[string]*prepared{}
	}
	p, ok := g.cache[key]
	if ok {
		select {
		case <-p.once:
			retry := g.RetryAfter
			if retry == 0 {
				retry = 30 * time.Second
			}
			if p.err != nil && now().Sub(p.failed) >= retry {
				ok = false
			}
		default:
		}
	}
	if !ok {
		p = &prepared{once: make(chan struct{})}
		g.cache[key] = p
		go g.prepare(c, p, now)
	}
	g.mu.Unlock()
	select {
	case <-p.once:
		return p.env, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// prepare runs get-credentials once, outside any caller's context, so a
// caller giving up does not cut the run the others wait for.
func (g *Gcloud) prepare(c Cluster, p *prepared, now func() time.Time) {
	defer close(p.once)
	file := filepath.Join(g.Dir, safe(c.Project)+"_"+safe(c.Zone)+"_"+safe(c.ClusterID)+".kubeconfig")
	env := []string{"KUBECONFIG=" + file}
	if err := os.MkdirAll(g.Dir, 0o700); err != nil {
		p.err, p.failed = err, now()
		return
	}
	r := g.Runner
	if r == nil {
		r = ExecRunner{}
	}
	path := g.GcloudPath
	if path == "" {
		path = "gcloud"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := r.Run(ctx, path, []string{"container", "clusters", "get-credentials", c.ClusterID, "--zone=" + c.Zone, "--project=" + c.Project}, env)
	switch {
	case err != nil:
		p.err = fmt.Errorf("credentials for cluster %s: %s: %w", c.Name, path, err)
	case res.ExitCode != 0:
		p.err = fmt.Errorf("credentials for cluster %s: gcloud container clusters get-credentials exited %d: %s", c.Name, res.ExitCode, tail(string(res.Stderr)))
	}
	if p.err != nil {
		p.failed = now()
		return
	}
	p.env = env
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}
