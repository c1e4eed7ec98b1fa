package probe

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/clusterconfig"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/xpk"
)

// DefaultInterval is how often Loop probes every cluster.
const DefaultInterval = 30 * time.Second

// Loop probes every active cluster on a schedule and reports the results
// to the API server. One cycle:
//
//  1. list the registered clusters; keep the active ones of a probed
//     backend (kubernetes, gke, xpk);
//  2. on the first cycle, prepare every xpk cluster's credentials at once
//     (001's concurrency note: once at start, not per probe);
//  3. probe them all in parallel, each within its probe_timeout_s;
//  4. report the results in one ReportClusterProbes call.
//
// Nothing is kept between cycles but whether step 2 ran: a restart
// prepares the credentials again and probes at once.
type Loop struct {
	clusters falconv1.ClusterServiceClient
	prober   *Prober
	creds    xpk.Credentials
	interval time.Duration
	log      *slog.Logger

	prepared bool
	stopOnce sync.Once
	draining chan struct{}
	stopped  chan struct{}
}

// NewLoop returns a Loop reporting over conn; creds may be nil.
func NewLoop(conn grpc.ClientConnInterface, p *Prober, creds xpk.Credentials, interval time.Duration, log *slog.Logger) *Loop {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if log == nil {
		log = slog.Default()
	}
	return &Loop{clusters: falconv1.NewClusterServiceClient(conn), prober: p, creds: creds, interval: interval, log: log,
		draining: make(chan struct{}), stopped: make(chan struct{})}
}

// Run probes every interval until ctx ends or Shutdown is called.
func (l *Loop) Run(ctx context.Context) error {
	defer close(l.stopped)
	for {
		if err := l.Cycle(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("cluster probes failed", "err", err)
		}
		t := time.NewTimer(l.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-l.draining:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Shutdown stops Run after the cycle in flight.
func (l *Loop) Shutdown(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.draining) })
	select {
	case <-l.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Cycle is one round of probes (see Loop).
func (l *Loop) Cycle(ctx context.Context) error {
	resp, err := l.clusters.ListClusters(ctx, &falconv1.ListClustersRequest{})
	if err != nil {
		return err
	}
	var targets []*falconv1.Cluster
	for _, c := range resp.GetItems() {
		if c.GetStatus() == store.ClusterActive && clusterconfig.Probed(c.GetBackend()) {
			targets = append(targets, c)
		}
	}
	if !l.prepared && l.creds != nil {
		l.prepare(ctx, targets)
		l.prepared = true
	}
	if len(targets) == 0 {
		return nil
	}
	results := l.prober.Probe(ctx, targets)
	for _, r := range results {
		l.log.Debug("cluster probed", "cluster", r.GetCluster(), "result", summary(r))
	}
	_, err = l.clusters.ReportClusterProbes(ctx, &falconv1.ReportClusterProbesRequest{Items: results})
	return err
}

// prepare fetches every xpk cluster's credentials side by side, each
// within its probe timeout; a failure is the cluster's probe's to report.
func (l *Loop) prepare(ctx context.Context, clusters []*falconv1.Cluster) {
	var wg sync.WaitGroup
	for _, c := range clusters {
		if c.GetBackend() != "xpk" {
			continue
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, Timeout(c))
			defer cancel()
			if _, err := l.creds.Env(pctx, xpk.FromAPI(c)); err != nil {
				l.log.Warn("preparing xpk credentials", "cluster", c.GetName(), "err", err)
			}
		})
	}
	wg.Wait()
}
