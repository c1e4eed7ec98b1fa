package gkeenv

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
	container "google.golang.org/api/container/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/testenv/fakegke"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

const (
	// syncInterval is how often the ticker advances the fake: its default
	// latencies are 50ms, so pools progress about when they are due.
	syncInterval = 50 * time.Millisecond
	// hookTimeout bounds registering or draining one pool's nodes, so a
	// stuck apiserver fails the test instead of hanging fakegke's caller.
	hookTimeout  = time.Minute
	pollInterval = 50 * time.Millisecond
)

// Cluster is one fake GKE cluster whose node pools are nodes of a kubeenv
// cluster.
type Cluster struct {
	kc    *kubeenv.Cluster
	path  string // projects/p/locations/l/clusters/c
	token string

	ctx        context.Context // of the hooks; cancelled by Close
	cancel     context.CancelFunc
	stopTicker chan struct{}
	tickerDone chan struct{}

	mu     sync.Mutex
	closed bool
	hooks  sync.WaitGroup // running hooks; Add only under mu while !closed
	errs   []error
}

// Join registers cluster projects/project/locations/location/clusters/name
// in srv, backed by kc, and closes it when tb ends, failing tb with any error
// its hooks met. Call it after kubeenv.Start, so that its cleanup runs while
// kc is still up.
func Join(tb testing.TB, srv *fakegke.Server, kc *kubeenv.Cluster, project, location, name string) *Cluster {
	tb.Helper()
	c := JoinContext(context.Background(), srv, kc, project, location, name)
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("gkeenv: cluster %s: %v", c.path, err)
		}
	})
	return c
}

// JoinContext is Join for callers without a testing.TB: ctx bounds the
// hooks, and the caller must call Close.
func JoinContext(ctx context.Context, srv *fakegke.Server, kc *kubeenv.Cluster, project, location, name string) *Cluster {
	rc := kc.RESTConfig()
	hctx, cancel := context.WithCancel(ctx)
	c := &Cluster{
		kc:         kc,
		path:       "projects/" + project + "/locations/" + location + "/clusters/" + name,
		token:      rc.BearerToken,
		ctx:        hctx,
		cancel:     cancel,
		stopTicker: make(chan struct{}),
		tickerDone: make(chan struct{}),
	}
	// GKE's endpoint is a bare address that clients prefix with https://.
	endpoint := strings.TrimPrefix(rc.Host, "https://")
	srv.AddCluster(project, location, name, endpoint, base64.StdEncoding.EncodeToString(rc.CAData))
	srv.OnPoolRunning(func(np container.NodePool) { c.hook(np, c.addNodes) })
	srv.OnPoolDeleted(func(np container.NodePool) { c.hook(np, c.drain) })
	go c.tick(srv)
	return c
}

// Path is the cluster's resource name, the parent of its node pools.
func (c *Cluster) Path() string { return c.path }

// TokenSource returns what the GKE backend gets from Application Default
// Credentials in production: a token the cluster's apiserver accepts (here
// its admin's static bearer token).
func (c *Cluster) TokenSource() oauth2.TokenSource {
	return oauth2.StaticTokenSource(&oauth2.Token{AccessToken: c.token, TokenType: "Bearer"})
}

// Nodes lists the nodes of the named pool.
func (c *Cluster) Nodes(ctx context.Context, pool string) ([]corev1.Node, error) {
	list, err := c.kc.Clientset().CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: accelerator.LabelNodePool + "=" + pool})
	if err != nil {
		return nil, fmt.Errorf("list nodes of pool %s: %w", pool, err)
	}
	return list.Items, nil
}

// WaitNodes waits until the named pool has exactly n nodes, all Ready (n = 0:
// until its nodes are gone), and returns them. It gives up early when a hook
// has failed, since the nodes will then never come.
func (c *Cluster) WaitNodes(ctx context.Context, pool string, n int) ([]corev1.Node, error) {
	for {
		if err := c.Err(); err != nil {
			return nil, err
		}
		nodes, err := c.Nodes(ctx, pool)
		if err == nil && len(nodes) == n && allReady(nodes) {
			return nodes, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pool %s: waiting for %d Ready nodes (have %d): %w", pool, n, len(nodes), ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// Err returns the errors the hooks have met so far.
func (c *Cluster) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.errs...)
}

// Close stops the ticker, waits for running hooks, ignores later ones and
// returns every error the hooks met. The fake keeps serving the cluster.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.Err()
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stopTicker)
	<-c.tickerDone
	c.hooks.Wait()
	c.cancel()
	return c.Err()
}

func (c *Cluster) tick(srv *fakegke.Server) {
	defer close(c.tickerDone)
	t := time.NewTicker(syncInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stopTicker:
			return
		case <-t.C:
			srv.Sync()
		}
	}
}

// hook runs f for a pool of this cluster. It runs on fakegke's goroutine,
// outside the server's lock, and must not call back into the server. Errors
// are recorded: failing a test from here could happen after it ended.
func (c *Cluster) hook(np container.NodePool, f func(context.Context, container.NodePool) error) {
	// The self link is the only thing in the hook's pool naming its cluster.
	_, rest, _ := strings.Cut(np.SelfLink, "/v1/")
	if !strings.HasPrefix(rest, c.path+"/nodePools/") {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.hooks.Add(1)
	c.mu.Unlock()
	defer c.hooks.Done()

	ctx, cancel := context.WithTimeout(c.ctx, hookTimeout)
	defer cancel()
	if err := f(ctx, np); err != nil {
		c.mu.Lock()
		c.errs = append(c.errs, err)
		c.mu.Unlock()
	}
}

// addNodes registers a RUNNING pool's nodes and waits until they are Ready.
func (c *Cluster) addNodes(ctx context.Context, np container.NodePool) error {
	s, err := shapeOf(&np)
	if err != nil {
		return err
	}
	if _, err := c.kc.AddNodes(ctx, int(np.InitialNodeCount), s.labels, s.taints, s.capacity); err != nil {
		return fmt.Errorf("pool %s: %w", np.Name, err)
	}
	return nil
}

// drain does what GKE does to a deleted pool's nodes: deletes their pods,
// waits until they are gone (kwok terminates them, the Job controller
// releases its finalizer) and removes the nodes. Deleting the nodes first
// would strand the pods, Running on no node, until pod GC's 40s quarantine.
func (c *Cluster) drain(ctx context.Context, np container.NodePool) error {
	nodes, err := c.Nodes(ctx, np.Name)
	if err != nil {
		return err
	}
	cs := c.kc.Clientset()
	for {
		left := 0
		for _, node := range nodes {
			onNode := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node.Name).String()}
			list, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, onNode)
			if err != nil {
				return fmt.Errorf("pool %s: list pods on node %s: %w", np.Name, node.Name, err)
			}
			left += len(list.Items)
			for _, p := range list.Items {
				if p.DeletionTimestamp != nil {
					continue
				}
				err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("pool %s: drain pod %s/%s: %w", np.Name, p.Namespace, p.Name, err)
				}
			}
		}
		if left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pool %s: drain: %d pods left: %w", np.Name, left, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
	for _, node := range nodes {
		err := cs.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("pool %s: delete node %s: %w", np.Name, node.Name, err)
		}
	}
	return nil
}

func allReady(nodes []corev1.Node) bool {
	for _, n := range nodes {
		ready := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				ready = cond.Status == corev1.ConditionTrue
			}
		}
		if !ready {
			return false
		}
	}
	return true
}
