package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/clusterconfig"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/xpk"
)

// KubeConfigs gives the client configuration of a kubernetes or gke
// cluster and the namespace Falcon's Jobs live in.
type KubeConfigs func(ctx context.Context, c *falconv1.Cluster) (*rest.Config, string, error)

// XpkLister lists an xpk cluster's workloads (xpk.Manager).
type XpkLister interface {
	List(ctx context.Context, c xpk.Cluster, filter xpk.State) ([]xpk.WorkloadInfo, error)
}

// Prober probes clusters. It is safe for concurrent use.
type Prober struct {
	kube  KubeConfigs
	xpk   XpkLister
	creds xpk.Credentials
	now   func() time.Time

	mu      sync.Mutex
	clients map[*rest.Config]kubernetes.Interface
}

// Option configures a Prober.
type Option func(*Prober)

// WithKube probes kubernetes and gke clusters through configs.
func WithKube(configs KubeConfigs) Option { return func(p *Prober) { p.kube = configs } }

// WithXpk probes xpk clusters with l, their credentials from creds.
func WithXpk(l XpkLister, creds xpk.Credentials) Option {
	return func(p *Prober) { p.xpk, p.creds = l, creds }
}

// WithClock injects the clock of probed_at.
func WithClock(now func() time.Time) Option { return func(p *Prober) { p.now = now } }

// New returns a Prober.
func New(opts ...Option) *Prober {
	p := &Prober{now: time.Now, clients: map[*rest.Config]kubernetes.Interface{}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Timeout is the cluster's probe_timeout_s, or the default.
func Timeout(c *falconv1.Cluster) time.Duration {
	s := c.GetProbeTimeoutS()
	if s <= 0 {
		s = clusterconfig.DefaultProbeTimeoutS
	}
	return time.Duration(s) * time.Second
}

// Probe probes every cluster in parallel and returns the results in the
// order of clusters. It takes as long as the slowest probe, which its
// cluster's timeout bounds.
func (p *Prober) Probe(ctx context.Context, clusters []*falconv1.Cluster) []*falconv1.ClusterProbe {
	out := make([]*falconv1.ClusterProbe, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Go(func() { out[i] = p.ProbeOne(ctx, c) })
	}
	wg.Wait()
	return out
}

// ProbeOne probes one cluster within its timeout.
func (p *Prober) ProbeOne(ctx context.Context, c *falconv1.Cluster) *falconv1.ClusterProbe {
	limit := Timeout(c)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	type answer struct {
		queued, running int
		err             error
	}
	done := make(chan answer, 1)
	// The probe runs beside the timer: a client that ignores its context
	// (a dial the kernel holds) still cannot hold the result past the
	// limit.
	go func() {
		q, r, err := p.count(ctx, c)
		done <- answer{q, r, err}
	}()
	res := &falconv1.ClusterProbe{Cluster: c.GetName()}
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		a.err = ctx.Err()
	}
	res.ProbedAt = timestamppb.New(p.now().UTC())
	var ue *xpk.ClusterUnreachableError
	switch {
	case errors.Is(a.err, context.DeadlineExceeded) || errors.As(a.err, &ue) && ue.TimedOut:
		res.Error = fmt.Sprintf("probe timed out after %ds", int(limit.Seconds()))
	case a.err != nil:
		res.Error = a.err.Error()
	default:
		q, r := int32(a.queued), int32(a.running)
		res.Reachable, res.QueueDepth, res.RunningCount = true, &q, &r
	}
	return res
}

func (p *Prober) count(ctx context.Context, c *falconv1.Cluster) (queued, running int, err error) {
	switch c.GetBackend() {
	case clusterconfig.BackendXpk:
		return p.countXpk(ctx, c)
	case clusterconfig.BackendKubernetes, clusterconfig.BackendGKE:
		return p.countKube(ctx, c)
	}
	return 0, 0, fmt.Errorf("cluster %s: %s clusters are not probed", c.GetName(), c.GetBackend())
}

func (p *Prober) countXpk(ctx context.Context, c *falconv1.Cluster) (int, int, error) {
	if p.xpk == nil {
		return 0, 0, fmt.Errorf("cluster %s: this process does not run xpk", c.GetName())
	}
	xc := xpk.FromAPI(c)
	if p.creds != nil {
		env, err := p.creds.Env(ctx, xc)
		if err != nil {
			return 0, 0, err
		}
		xc.Env = env
	}
	rows, err := p.xpk.List(ctx, xc, "")
	if err != nil {
		return 0, 0, err
	}
	var q, r int
	for _, w := range rows {
		switch w.State {
		case xpk.StateQueued:
			q++
		case xpk.StateRunning:
			r++
		}
	}
	return q, r, nil
}

func (p *Prober) countKube(ctx context.Context, c *falconv1.Cluster) (int, int, error) {
	if p.kube == nil {
		return 0, 0, fmt.Errorf("cluster %s: this process has no credentials for %s clusters", c.GetName(), c.GetBackend())
	}
	cfg, ns, err := p.kube(ctx, c)
	if err != nil {
		return 0, 0, err
	}
	cs, err := p.client(cfg)
	if err != nil {
		return 0, 0, err
	}
	jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: render.ManagedBySelector})
	if err != nil {
		return 0, 0, fmt.Errorf("list Falcon's Jobs in %s: %w", ns, err)
	}
	var q, r int
	for i := range jobs.Items {
		switch jobState(&jobs.Items[i]) {
		case xpk.StateQueued:
			q++
		case xpk.StateRunning:
			r++
		}
	}
	return q, r, nil
}

// jobState reads a Falcon Job as a workload: ended, running (a pod
// ready), or queued (waiting for its pods to be scheduled and start).
func jobState(j *batchv1.Job) xpk.State {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return xpk.StateCompleted
		}
	}
	if j.Status.Ready != nil && *j.Status.Ready > 0 {
		return xpk.StateRunning
	}
	return xpk.StateQueued
}

// client keeps one client per configuration: configs are cached by their
// source, and a client holds its connections.
func (p *Prober) client(cfg *rest.Config) (kubernetes.Interface, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cs, ok := p.clients[cfg]; ok {
		return cs, nil
	}
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, err
	}
	p.clients[cfg] = cs
	return cs, nil
}

// summary is a one-line account of a probe, for logs.
func summary(r *falconv1.ClusterProbe) string {
	if !r.GetReachable() {
		return "unreachable: " + strings.SplitN(r.GetError(), "\n", 2)[0]
	}
	return fmt.Sprintf("queue_depth=%d running=%d", r.GetQueueDepth(), r.GetRunningCount())
}
