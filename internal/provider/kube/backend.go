package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/placement"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/resourcemanager"
)

// BackendName is the value of a cluster's backend field for this backend.
const BackendName = "kubernetes"

// Backend drives jobs on Kubernetes clusters.
type Backend struct {
	log         *slog.Logger
	onChange    func()
	onJobChange func(jobID string)
	restFor     func(*falconv1.Cluster) (*rest.Config, error)
	now         func() time.Time
	callLimit   time.Duration

	mu    sync.Mutex
	edges map[string]*edge // by cluster name
	// broken is why a cluster's connection could not even be built (its
	// kubeconfig), by cluster name, until it can.
	broken map[string]error
	// submitted is when this process created each job's Kubernetes Job, so
	// an Observe right after (before the informer has caught up) need not
	// ask the apiserver whether the Job exists.
	submitted sync.Map // job ID -> time.Time
}

var (
	_ resourcemanager.Backend        = (*Backend)(nil)
	_ resourcemanager.HealthReporter = (*Backend)(nil)
	_ resourcemanager.Sweeper        = (*Backend)(nil)
)

// Option configures a Backend.
type Option func(*Backend)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(b *Backend) { b.log = l } }

// WithOnChange is called whenever an informer sees a Falcon object change.
func WithOnChange(f func()) Option { return func(b *Backend) { b.onChange = f } }

// WithOnJobChange is called with the Falcon job ID of every Job or pod an
// informer sees change, so the resource manager looks at that job alone;
// objects without the label fall back to WithOnChange.
func WithOnJobChange(f func(jobID string)) Option { return func(b *Backend) { b.onJobChange = f } }

// changed reports an informer event: by job ID when the object carries one.
func (b *Backend) changed(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if o, ok := obj.(metav1.Object); ok && b.onJobChange != nil {
		if id := o.GetLabels()[render.LabelJobID]; id != "" {
			b.onJobChange(id)
			return
		}
	}
	b.onChange()
}

// WithRESTConfig replaces how a cluster's connection is built (default: the
// cluster's kubeconfig file and context).
func WithRESTConfig(f func(*falconv1.Cluster) (*rest.Config, error)) Option {
	return func(b *Backend) { b.restFor = f }
}

// New returns a Backend.
func New(opts ...Option) *Backend {
	b := &Backend{
		log:       slog.Default(),
		onChange:  func() {},
		restFor:   KubeconfigREST,
		now:       time.Now,
		callLimit: 10 * time.Second,
		edges:     map[string]*edge{},
		broken:    map[string]error{},
	}
	for _, o := range opts {
		o(b)
	}
	return b
}

// ClusterQPS is the resource manager's request rate to one cluster's
// apiserver (bursts of twice as many) when the connection does not set its
// own: the per-cluster rate limit of its creates, deletes and lookups.
const ClusterQPS = 50

// clientConfig is the connection the backend's clients and informers use:
// a copy of cfg without a client-wide timeout (watches are long; calls
// carry their own deadlines) and, unless cfg sets one, at ClusterQPS. A
// kubeconfig cannot set a rate, and client-go's default (5 a second,
// bursts of 10) is for command-line tools: behind it a busy cluster's
// creates and deletes waited up to 750 ms each in BenchmarkKubeDispatch,
// which capped dispatch near 5 Jobs/s per cluster.
//
// It speaks protobuf, as Kubernetes' own controllers do: the backend's
// clients touch only built-in kinds (Jobs, Pods, Services), and every
// report of a Job or pod arrives through a watch whose JSON the backend
// decoded at about a tenth of falcon dev's CPU in BenchmarkKubeDispatch.
// JSON stays accepted, for whatever answers without protobuf.
//
// It asks for no gzip, as Kubernetes' own control-plane components do
// not: the apiserver compresses a watch list's stream (informers start
// with one) for a client that accepts gzip, so every event of every Job
// and pod was compressed by the apiserver and inflated again here, 3% of
// falcon dev's CPU in BenchmarkKubeDispatch, for events of a few KiB.
func clientConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 0
	cfg.DisableCompression = true
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = ClusterQPS, 2*ClusterQPS
	}
	if cfg.ContentType == "" {
		cfg.ContentType = runtime.ContentTypeProtobuf
		cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	return cfg
}

// KubeconfigREST builds a client config from the cluster's kubeconfig path
// (default loading rules when empty: $KUBECONFIG, ~/.kube/config) and context.
func KubeconfigREST(c *falconv1.Cluster) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.GetKubeconfig() != "" {
		rules.ExplicitPath = c.GetKubeconfig()
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: c.GetKubeContext()}).ClientConfig()
	if err != nil {
		// A kubeconfig that is missing, unreadable or names no such context
		// fails every call the same way until an operator fixes it.
		return nil, &resourcemanager.UnusableError{Err: fmt.Errorf("kubeconfig for cluster %s (context %q): %w", c.GetName(), c.GetKubeContext(), err)}
	}
	return cfg, nil
}

// edge is one cluster's client, informers and health.
type edge struct {
	key       string
	namespace string
	client    kubernetes.Interface
	jobs      batchlisters.JobLister
	// podsOfJob reads the informer's pods by their Falcon job ID
	// (podsByJob): a lister's List matches every pod of the namespace
	// against a selector, and Observe runs for every report.
	podsOfJob func(jobID string) ([]any, error)
	synced    func() bool
	stop      chan struct{}

	mu        sync.Mutex
	failures  int
	retryAt   time.Time
	lastError error
	failedAt  time.Time // of lastError
}

func connKey(c *falconv1.Cluster) string {
	return strings.Join([]string{c.GetKubeconfig(), c.GetKubeContext(), namespace(c)}, "\x00")
}

func namespace(c *falconv1.Cluster) string {
	if ns := c.GetNamespace(); ns != "" {
		return ns
	}
	return "default"
}

// edgeFor returns the cluster's connection, (re)building it when the
// cluster's registration changed, and failing fast while it is backing off.
func (b *Backend) edgeFor(c *falconv1.Cluster) (*edge, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.edges[c.GetName()]
	if ok && e.key != connKey(c) {
		close(e.stop)
		delete(b.edges, c.GetName())
		ok = false
	}
	if !ok {
		cfg, err := b.restFor(c)
		if err != nil {
			b.broken[c.GetName()] = err
			return nil, err
		}
		cfg = clientConfig(cfg)
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			err = &resourcemanager.UnusableError{Err: fmt.Errorf("client for cluster %s: %w", c.GetName(), err)}
			b.broken[c.GetName()] = err
			return nil, err
		}
		delete(b.broken, c.GetName())
		e = &edge{key: connKey(c), namespace: namespace(c), client: cs, stop: make(chan struct{})}
		f := informers.NewSharedInformerFactoryWithOptions(cs, 10*time.Minute,
			informers.WithNamespace(e.namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = render.ManagedBySelector }))
		ji, pi := f.Batch().V1().Jobs(), f.Core().V1().Pods()
		// The informers are taken from the factory once: each Informer()
		// call allocates an empty Job or Pod to look its informer up, and
		// Observe runs for every report (37 MB in 18 s of
		// BenchmarkKubeDispatch).
		jinf, pinf := ji.Informer(), pi.Informer()
		h := cache.ResourceEventHandlerFuncs{
			AddFunc:    b.changed,
			UpdateFunc: func(_, obj any) { b.changed(obj) },
			DeleteFunc: b.changed,
		}
		if _, err := jinf.AddEventHandler(h); err != nil {
			return nil, err
		}
		if _, err := pinf.AddEventHandler(h); err != nil {
			return nil, err
		}
		if err := pinf.AddIndexers(cache.Indexers{podsByJob: jobIDOfPod}); err != nil {
			return nil, err
		}
		e.jobs = ji.Lister()
		e.podsOfJob = func(id string) ([]any, error) { return pinf.GetIndexer().ByIndex(podsByJob, id) }
		e.synced = func() bool { return jinf.HasSynced() && pinf.HasSynced() }
		// A watch that fails (apiserver down, token rejected) is retried by
		// the reflector with backoff. An unreachable apiserver is also what
		// every call would meet, so it backs calls off too, before the
		// first of them spends its call limit finding out.
		name, ed := c.GetName(), e
		for _, inf := range []cache.SharedIndexInformer{jinf, pinf} {
			_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
				if ed.watchFailed(b.now(), err) {
					b.log.Warn("watch on edge cluster failed; retrying", "cluster", name, "err", err)
				}
			})
		}
		f.Start(e.stop)
		b.edges[c.GetName()] = e
	}
	return e, e.check(b.now())
}

// Health reports the cluster's latest connection failure and whether calls
// to it are backing off. A cluster never connected to has nothing to
// report, unless its connection could not even be built.
func (b *Backend) Health(c *falconv1.Cluster) resourcemanager.Health {
	b.mu.Lock()
	e, ok := b.edges[c.GetName()]
	broken := b.broken[c.GetName()]
	b.mu.Unlock()
	if !ok || e.key != connKey(c) {
		// No calls are made without a connection, so there is nothing to
		// back off from: each one fails at once.
		return resourcemanager.Health{Err: broken}
	}
	return e.health(b.now())
}

// healthMemory is how long a connection failure is reported after it
// happened, unless a call succeeds first. It outlasts the longest backoff
// between calls (a minute) and between the informers' watch retries (30s),
// so a cluster that stays down keeps reporting; and since a recovered watch
// says nothing, it is also how a failure is forgotten when the only traffic
// is the watch.
const healthMemory = 2 * time.Minute

func (e *edge) health(now time.Time) resourcemanager.Health {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := resourcemanager.Health{Backoff: now.Before(e.retryAt)}
	if e.lastError != nil && (h.Backoff || now.Sub(e.failedAt) < healthMemory) {
		h.Err = e.lastError
	}
	return h
}

// watchFailed notes a failed list or watch of an informer, and reports
// whether it is worth a warning: a watch the apiserver closed or expired is
// routine, and is simply resumed.
func (e *edge) watchFailed(now time.Time, err error) bool {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), apierrors.IsResourceExpired(err), apierrors.IsGone(err):
		return false
	case unreachable(err):
		e.record(now, err)
	}
	return true
}

// check fails fast while the cluster is in backoff after failed calls.
func (e *edge) check(now time.Time) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.Before(e.retryAt) {
		return fmt.Errorf("cluster unreachable, retrying in %s: %w", e.retryAt.Sub(now).Round(time.Second), e.lastError)
	}
	return nil
}

// record notes the outcome of a call to the cluster's apiserver: a
// connection-level failure starts or extends exponential backoff.
func (e *edge) record(now time.Time, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil || !unreachable(err) {
		e.failures, e.retryAt, e.lastError = 0, time.Time{}, nil
		return
	}
	e.failures++
	backoff := min(time.Second<<min(e.failures-1, 6), time.Minute)
	e.retryAt, e.lastError, e.failedAt = now.Add(backoff), err, now
}

func unreachable(err error) bool {
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false // the server answered
	}
	return true // transport-level: refused, reset, DNS, TLS, deadline
}

// informerLag bounds how long after creating a Job its absence from the
// informer's cache is put down to the watch not having delivered it yet.
const informerLag = 30 * time.Second

// Close stops every informer.
func (b *Backend) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for n, e := range b.edges {
		close(e.stop)
		delete(b.edges, n)
	}
}

// Dispatch creates the job's Service (multi-host) and its Jobs, one per
// slice. All are named from the job ID, so a retry finds what an earlier
// attempt created; the slices of a multi-slice job are created together,
// in one call, and an attempt cut short is completed by the next.
func (b *Backend) Dispatch(ctx context.Context, c *falconv1.Cluster, j *falconv1.Job) error {
	e, err := b.edgeFor(c)
	var unusable *resourcemanager.UnusableError
	if errors.As(err, &unusable) {
		return err // no connection can be built: final (see UnusableError)
	}
	if err != nil {
		// The cluster is backing off after failed calls, or its endpoint
		// could not be looked up: that may pass while the job waits.
		return resourcemanager.Retryable(err)
	}
	objs, err := render.Render(render.Input{
		Job: j, Config: j.GetConfig(), ClusterID: c.GetId(), ClusterName: c.GetName(),
		Namespace: e.namespace, Bucket: c.GetGcsBucket(), NodePool: j.GetNodePool(),
		ServiceAccount: c.GetServiceAccount(),
		// A safety net: Falcon deletes finished Jobs on pooled clusters
		// itself, and users may want a finished Job's pods for a day.
		TTLAfterFinished: 24 * time.Hour,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, b.callLimit)
	defer cancel()
	if objs.Service != nil {
		_, err := e.client.CoreV1().Services(e.namespace).Create(ctx, objs.Service, metav1.CreateOptions{})
		e.record(b.now(), ignoreExists(err))
		if err := ignoreExists(err); err != nil {
			return retryable(fmt.Errorf("create Service %s/%s: %w", e.namespace, objs.Service.Name, err))
		}
	}
	for i, job := range objs.Jobs {
		if err := b.createJob(ctx, e, j, job, objs.Service, i == 0); err != nil {
			return err
		}
	}
	b.submitted.Store(j.GetId(), b.now())
	return nil
}

// createJob creates one of j's Jobs; the first owns svc, so deleting it
// deletes the Service too. A Job of that name that Falcon created for j
// already is success.
func (b *Backend) createJob(ctx context.Context, e *edge, j *falconv1.Job, job *batchv1.Job, svc *corev1.Service, ownsService bool) error {
	start := time.Now()
	created, err := e.client.BatchV1().Jobs(e.namespace).Create(ctx, job, metav1.CreateOptions{})
	e.record(b.now(), ignoreExists(err))
	b.log.Debug("create Kubernetes Job", "job", j.GetId(), "name", job.Name, "took", time.Since(start), "err", err)
	if err == nil && svc != nil && ownsService {
		// Let the garbage collector delete the Service with the Job, even
		// if the Job is removed outside Falcon.
		svc, gerr := e.client.CoreV1().Services(e.namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if gerr == nil {
			render.SetOwner(svc, created)
			if _, uerr := e.client.CoreV1().Services(e.namespace).Update(ctx, svc, metav1.UpdateOptions{}); uerr != nil {
				b.log.Debug("set Service owner", "job", j.GetId(), "err", uerr)
			}
		}
	}
	if apierrors.IsAlreadyExists(err) {
		existing, gerr := e.client.BatchV1().Jobs(e.namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if gerr != nil {
			return retryable(fmt.Errorf("get existing Job %s/%s: %w", e.namespace, job.Name, gerr))
		}
		if existing.Labels[render.LabelJobID] != j.GetId() {
			return fmt.Errorf("a Job named %s/%s exists that Falcon did not create for %s", e.namespace, job.Name, j.GetId())
		}
		return nil
	}
	if err != nil {
		return retryable(fmt.Errorf("create Job %s/%s: %w", e.namespace, job.Name, err))
	}
	return nil
}

// retryable marks a failed call the manager should try again: the cluster
// could not be reached or was overloaded (unreachable), had an internal
// error, or refused a credential (client-go fetches a fresh token only
// after handing back the 401). Refusals of the Job itself (invalid,
// forbidden, quota) stay final.
func retryable(err error) error {
	if err == nil {
		return nil
	}
	if unreachable(err) || apierrors.IsUnauthorized(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err) {
		return resourcemanager.Retryable(err)
	}
	return err
}

// Stop deletes the Jobs (every slice's) and their pods and Service.
// Missing objects are fine.
func (b *Backend) Stop(ctx context.Context, c *falconv1.Cluster, j *falconv1.Job) error {
	e, err := b.edgeFor(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, b.callLimit)
	defer cancel()
	name := render.Name(j.GetId())
	b.submitted.Delete(j.GetId())
	bg := metav1.DeletePropagationBackground
	// By Falcon's job label rather than by name: every slice's Job goes,
	// also for a job whose row (and so its slice count) is gone, as when
	// the sweep removes what a deleted experiment left behind.
	sel := labels.Set{render.LabelJobID: j.GetId()}.String()
	err = e.client.BatchV1().Jobs(e.namespace).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg},
		metav1.ListOptions{LabelSelector: sel})
	e.record(b.now(), ignoreNotFound(err))
	if err := ignoreNotFound(err); err != nil {
		return fmt.Errorf("delete the Jobs of %s in %s: %w", j.GetId(), e.namespace, err)
	}
	// Don't wait for the garbage collector to notice the Job is gone: start
	// terminating the pods now (with their grace period, so a task can
	// flush a last profile or log line).
	if err := e.client.CoreV1().Pods(e.namespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: sel}); ignoreNotFound(err) != nil {
		return fmt.Errorf("delete pods of %s: %w", name, err)
	}
	if err := e.client.CoreV1().Services(e.namespace).Delete(ctx, name, metav1.DeleteOptions{}); ignoreNotFound(err) != nil {
		return fmt.Errorf("delete Service %s/%s: %w", e.namespace, name, err)
	}
	return nil
}

// Residents lists the Falcon jobs that have a Kubernetes Job on the
// cluster, each active while any of its slices' Jobs has not finished, from
// the informer cache (no call to the apiserver); nothing while the cache
// has not synced.
func (b *Backend) Residents(c *falconv1.Cluster) ([]resourcemanager.Resident, error) {
	e, err := b.edgeFor(c)
	if err != nil {
		return nil, err
	}
	if !e.synced() {
		// Not "none": a sweep that took an empty cache for an empty
		// cluster would leave an ended job's Job until the next resync.
		return nil, errNotSynced
	}
	jobs, err := e.jobs.Jobs(e.namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]resourcemanager.Resident, 0, len(jobs))
	at := map[string]int{}
	for _, j := range jobs {
		id := j.Labels[render.LabelJobID]
		if id == "" {
			continue
		}
		i, seen := at[id]
		if !seen { // once for all its slices
			i = len(out)
			at[id] = i
			out = append(out, resourcemanager.Resident{JobID: id})
		}
		out[i].Active = out[i].Active || !finished(j)
	}
	return out, nil
}

// finished reports whether the Job has ended, as its controller says:
// a Complete, SuccessCriteriaMet, Failed or FailureTarget condition.
func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet, batchv1.JobFailed, batchv1.JobFailureTarget:
			if c.Status == corev1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

// errNotSynced: the cluster's informer caches have not synced yet.
var errNotSynced = errors.New("the cluster's caches have not synced yet")

// Observe reports the job from the informer caches: its one Job, or on a
// multi-slice job every slice's, combined (ObserveSlices).
func (b *Backend) Observe(ctx context.Context, c *falconv1.Cluster, j *falconv1.Job) (resourcemanager.Observation, error) {
	e, err := b.edgeFor(c)
	if err != nil {
		return resourcemanager.Observation{}, err
	}
	names := render.JobNames(j.GetId(), placement.Slices(j.GetTaskSpec()))
	jobs := make([]*batchv1.Job, len(names))
	for i, name := range names {
		job, obs, err := b.getJob(ctx, e, j, name)
		if err != nil || job == nil {
			return obs, err
		}
		jobs[i] = job
	}
	b.submitted.Delete(j.GetId()) // the informer has them now
	var pods []*corev1.Pod
	if e.synced() {
		objs, err := e.podsOfJob(j.GetId())
		if err != nil {
			return resourcemanager.Observation{}, err
		}
		for _, o := range objs {
			pods = append(pods, o.(*corev1.Pod))
		}
	} else {
		gctx, cancel := context.WithTimeout(ctx, b.callLimit)
		list, err := e.client.CoreV1().Pods(e.namespace).List(gctx, metav1.ListOptions{LabelSelector: render.LabelJobID + "=" + j.GetId()})
		cancel()
		e.record(b.now(), err)
		if err != nil {
			return resourcemanager.Observation{}, err
		}
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
	}
	replica := int(j.GetTaskSpec().GetReplica())
	if len(jobs) == 1 {
		return Observe(jobs[0], pods, replica), nil
	}
	perSlice := make([]resourcemanager.Observation, len(jobs))
	for i, job := range jobs {
		var mine []*corev1.Pod
		for _, p := range pods {
			// Falcon's slice label: batch.kubernetes.io/job-name is
			// only set by Kubernetes 1.27 and later.
			if p.Labels[render.LabelSlice] == strconv.Itoa(i) {
				mine = append(mine, p)
			}
		}
		perSlice[i] = Observe(job, mine, replica)
	}
	return ObserveSlices(perSlice), nil
}

// getJob reads one of j's Jobs from the informer cache, asking the
// apiserver when the cache does not have it. A nil Job comes with the
// observation to report instead: just submitted, or gone.
func (b *Backend) getJob(ctx context.Context, e *edge, j *falconv1.Job, name string) (*batchv1.Job, resourcemanager.Observation, error) {
	job, err := e.jobs.Jobs(e.namespace).Get(name)
	if apierrors.IsNotFound(err) && e.synced() {
		if at, ok := b.submitted.Load(j.GetId()); ok && b.now().Sub(at.(time.Time)) < informerLag {
			return nil, resourcemanager.Observation{Phase: resourcemanager.PhasePending,
				Message: fmt.Sprintf("submitted Kubernetes Job %s/%s; waiting for its pods", e.namespace, name)}, nil
		}
	}
	if apierrors.IsNotFound(err) || !e.synced() {
		// The cache may lag a create; ask the apiserver before concluding.
		gctx, cancel := context.WithTimeout(ctx, b.callLimit)
		job, err = e.client.BatchV1().Jobs(e.namespace).Get(gctx, name, metav1.GetOptions{})
		cancel()
		e.record(b.now(), ignoreNotFound(err))
	}
	if apierrors.IsNotFound(err) {
		return nil, resourcemanager.Observation{Phase: resourcemanager.PhaseUnknown,
			Message: fmt.Sprintf("Kubernetes Job %s/%s is gone (deleted outside Falcon?)", e.namespace, name)}, nil
	}
	if err != nil {
		return nil, resourcemanager.Observation{}, err
	}
	return job, resourcemanager.Observation{}, nil
}

// podsByJob indexes the informer's pods by their Falcon job ID.
const podsByJob = "falcon-job-id"

func jobIDOfPod(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[render.LabelJobID] == "" {
		return nil, nil
	}
	return []string{p.Labels[render.LabelJobID]}, nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
