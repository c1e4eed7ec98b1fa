package kubeenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

//go:embed kwok.yaml
var kwokConfig []byte

// Controllers kube-controller-manager runs: what Falcon's jobs need (Job,
// TTL-after-finished, garbage collection of a Job's pods, pod GC), what every
// namespace needs (namespace deletion, default service account, its token and
// root CA), role aggregation (so admin/edit/view grant what they say), and
// the usual workload and quota controllers. Node lifecycle is left out, with
// the apiserver's TaintNodesByCondition plugin: kwok keeps nodes Ready, and no
// taint is added or removed behind a test's back (or a loaded machine's slow
// lease renewals turned into NotReady nodes).
var controllers = []string{
	"job-controller",
	"ttl-after-finished-controller",
	"garbage-collector-controller",
	"pod-garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"clusterrole-aggregation-controller",
	"endpointslice-controller",
	"replicaset-controller",
	"deployment-controller",
	"resourcequota-controller",
}

// Option configures a cluster.
type Option func(*options)

type options struct {
	name         string
	binDir       string
	startTimeout time.Duration
	extraArgs    map[string][]string
	logf         func(format string, args ...any)
	podLogs      bool
	podExec      bool
}

// WithName names the cluster: the kubeconfig's cluster and context are called
// name. The default is edge-1, edge-2, ... in start order within the process.
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithBinDir runs the binaries in dir instead of looking them up (see BinDir).
func WithBinDir(dir string) Option { return func(o *options) { o.binDir = dir } }

// WithStartTimeout bounds how long starting waits for every component to be
// ready; the default is 2 minutes, generous for a loaded 2-core machine.
func WithStartTimeout(d time.Duration) Option { return func(o *options) { o.startTimeout = d } }

// WithExtraArgs appends flags to one component's command line: component is
// "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler" or
// "kwok". A repeated scalar flag overrides the harness's value.
func WithExtraArgs(component string, args ...string) Option {
	return func(o *options) { o.extraArgs[component] = append(o.extraArgs[component], args...) }
}

// WithLogf sends progress messages (a binary build, the start time) to logf.
// Start uses the test's Logf.
func WithLogf(logf func(format string, args ...any)) Option {
	return func(o *options) { o.logf = logf }
}

var clusterSeq atomic.Int64

// Cluster is one running edge cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok, each a child process.
type Cluster struct {
	name    string
	dir     string
	pki     *pki
	host    string // https://127.0.0.1:port
	startup time.Duration

	etcd, apiserver, controllerManager, scheduler, kwok *process

	restConfig     *rest.Config
	clientset      *kubernetes.Clientset
	kubeconfig     []byte
	kubeconfigPath string
	probe          *http.Client // trusts the cluster CA, for health endpoints

	nodeSeq  atomic.Int64
	stopOnce sync.Once

	podLogs  bool // WithPodLogs: kwok serves pods/log from files
	podExec  bool // WithPodExec: kwok serves pods/exec too
	kwokPort int  // kwok's kubelet-like server, when podLogs

	stalls *stallWatch // repairs pods whose end kwok lost
}

// Start starts a cluster in a directory under tb.TempDir and stops it when tb
// ends. It never skips: missing binaries are built (minutes, once per
// machine), and a failure to build or start fails tb. When tb has failed, the
// tail of every component's log is written to the test log.
func Start(tb testing.TB, opts ...Option) *Cluster {
	tb.Helper()
	c, err := StartCluster(context.Background(), tb.TempDir(), append([]Option{WithLogf(tb.Logf)}, opts...)...)
	if err != nil {
		tb.Fatalf("kubeenv: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			var b strings.Builder
			c.DumpLogs(&b, 40)
			tb.Logf("kubeenv: cluster %s logs (dir %s):\n%s", c.name, c.dir, b.String())
		}
		c.Stop()
	})
	return c
}

// StartCluster starts a cluster whose data, certificates, configs and logs
// live in dir, and returns once the apiserver is ready, the controller
// manager and scheduler are healthy and the default service account exists.
// The caller must call Stop. On error nothing is left running and the error
// carries the tail of the component logs.
func StartCluster(ctx context.Context, dir string, opts ...Option) (*Cluster, error) {
	o := options{startTimeout: 2 * time.Minute, extraArgs: map[string][]string{}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.name == "" {
		o.name = fmt.Sprintf("edge-%d", clusterSeq.Add(1))
	}
	if o.logf == nil {
		o.logf = func(string, ...any) {}
	}
	binDir := o.binDir
	if binDir == "" {
		var err error
		if binDir, err = BinDir(ctx, o.logf); err != nil {
			return nil, err
		}
	} else if err := checkBinDir(binDir); err != nil {
		return nil, err
	}

	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, o.startTimeout)
	defer cancel()

	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{name: o.name, dir: dir}
	if c.pki, err = newPKI(dir); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	nports := 5
	if o.podLogs {
		nports++
	}
	ports, err := freePorts(nports)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort, kcmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	var podLogArgs podLogArgs
	if o.podLogs {
		c.podLogs, c.podExec, c.kwokPort = true, o.podExec, ports[5]
		if podLogArgs, err = c.podLogArgs(); err != nil {
			return nil, fmt.Errorf("pod logs: %w", err)
		}
	}
	c.host = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	if err := c.writeConfigs(); err != nil {
		return nil, err
	}
	p := c.pki
	path := func(name string) string { return filepath.Join(dir, name) }
	loopback := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
	etcdURL := "http://" + loopback(etcdPort)
	peerURL := "http://" + loopback(peerPort)

	c.etcd = newProcess(dir, binEtcd, binDir, append([]string{
		"--name=default",
		"--data-dir=" + path("etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync=true", // a test cluster dies with its test: durability buys nothing
		"--log-level=warn",
	}, o.extraArgs[binEtcd]...), nil)

	c.apiserver = newProcess(dir, binAPIServer, binDir, append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + path("apiserver"),
		"--tls-cert-file=" + p.ServingCert,
		"--tls-private-key-file=" + p.ServingKey,
		"--client-ca-file=" + p.CACert,
		"--token-auth-file=" + p.TokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + saTokenIssuer,
		"--service-account-key-file=" + p.SAPub,
		"--service-account-signing-key-file=" + p.SAKey,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		// This plugin taints every new node node.kubernetes.io/not-ready,
		// and only the node lifecycle controller, which is not run, would
		// lift it. kwok makes nodes Ready at once, so nothing is lost.
		"--disable-admission-plugins=TaintNodesByCondition",
		// One apiserver on loopback: the kubernetes service's endpoints
		// would be rejected (loopback) and are of no use to a test.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--v=1",
	}, append(podLogArgs.apiserver, o.extraArgs[binAPIServer]...)...), nil)

	c.controllerManager = newProcess(dir, binController, binDir, append([]string{
		"--kubeconfig=" + path("kube-controller-manager.kubeconfig"),
		// No --authentication/authorization-kubeconfig: they make the
		// controller manager exit if the apiserver is not up yet, and only
		// guard /metrics. /healthz is always allowed.
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(kcmPort),
		"--tls-cert-file=" + p.ServingCert,
		"--tls-private-key-file=" + p.ServingKey,
		// Without leader election a controller manager outlives an
		// apiserver restart instead of exiting when it cannot renew.
		"--leader-elect=false",
		"--controllers=" + strings.Join(controllers, ","),
		"--service-account-private-key-file=" + p.SAKey,
		"--root-ca-file=" + p.CACert,
		"--use-service-account-credentials=false",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--v=1",
	}, o.extraArgs[binController]...), nil)

	c.scheduler = newProcess(dir, binScheduler, binDir, append([]string{
		"--config=" + path("kube-scheduler.yaml"),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(schedPort),
		"--tls-cert-file=" + p.ServingCert,
		"--tls-private-key-file=" + p.ServingKey,
		"--v=1",
	}, o.extraArgs[binScheduler]...), nil)

	// HOME points into the cluster dir so that a developer's ~/.kwok/kwok.yaml
	// is never merged into this configuration.
	c.kwok = newProcess(dir, binKwok, binDir, append([]string{
		"--kubeconfig=" + path("kwok.kubeconfig"),
		"--config=" + path("kwok.yaml"),
	}, append(podLogArgs.kwok, o.extraArgs[binKwok]...)...), []string{"HOME=" + path("kwok")})

	fail := func(err error) (*Cluster, error) {
		var b strings.Builder
		c.DumpLogs(&b, 30)
		c.Stop()
		return nil, fmt.Errorf("start cluster %s in %s: %w\n%s", c.name, dir, err, b.String())
	}
	if err := c.etcd.start(); err != nil {
		return fail(err)
	}
	if err := c.waitHTTP(ctx, c.etcd, etcdURL+"/health"); err != nil {
		return fail(err)
	}
	// The others retry until the apiserver answers, so they start now and
	// load their binaries and configs while it initialises. With pod logs,
	// kwok waits for the apiserver and the CRDs it watches (see podlogs.go).
	early := []*process{c.apiserver, c.controllerManager, c.scheduler, c.kwok}
	if c.podLogs {
		early = early[:3]
	}
	for _, proc := range early {
		if err := proc.start(); err != nil {
			return fail(err)
		}
	}
	if err := c.waitHTTP(ctx, c.apiserver, c.host+"/readyz"); err != nil {
		return fail(err)
	}
	if c.podLogs {
		if err := c.installLogCRDs(ctx); err != nil {
			return fail(err)
		}
		if err := c.kwok.start(); err != nil {
			return fail(err)
		}
		if err := c.waitKwokServer(ctx); err != nil {
			return fail(err)
		}
	}
	if err := c.waitStarted(ctx, c.controllerManager, "https://"+loopback(kcmPort)+"/healthz"); err != nil {
		return fail(err)
	}
	if err := c.waitStarted(ctx, c.scheduler, "https://"+loopback(schedPort)+"/readyz"); err != nil {
		return fail(err)
	}
	if err := c.waitServiceAccount(ctx, metav1.NamespaceDefault); err != nil {
		return fail(err)
	}
	if exited, err := c.kwok.exited(); exited {
		return fail(fmt.Errorf("kwok exited: %v", err))
	}
	c.startup = time.Since(begin)
	c.stalls = startStallWatch(c.clientset, o.logf)
	o.logf("kubeenv: cluster %s ready at %s in %s", c.name, c.host, c.startup.Round(time.Millisecond))
	return c, nil
}

// writeConfigs writes the kubeconfigs, the scheduler's configuration and
// kwok's, and builds the clients.
func (c *Cluster) writeConfigs() error {
	p := c.pki
	admin := clientcmdapi.NewConfig()
	admin.Clusters[c.name] = &clientcmdapi.Cluster{Server: c.host, CertificateAuthorityData: p.caPEM}
	admin.AuthInfos[adminUser] = &clientcmdapi.AuthInfo{Token: p.AdminToken}
	admin.Contexts[c.name] = &clientcmdapi.Context{Cluster: c.name, AuthInfo: adminUser}
	admin.CurrentContext = c.name
	var err error
	if c.kubeconfig, err = clientcmd.Write(*admin); err != nil {
		return err
	}
	c.kubeconfigPath = filepath.Join(c.dir, "kubeconfig")
	if err := os.WriteFile(c.kubeconfigPath, c.kubeconfig, 0o600); err != nil {
		return err
	}

	for _, comp := range []struct{ file, user string }{
		{"kube-controller-manager.kubeconfig", "system:kube-controller-manager"},
		{"kube-scheduler.kubeconfig", "system:kube-scheduler"},
		{"kwok.kubeconfig", "system:kwok-controller"},
	} {
		cert, key, err := p.clientCert(comp.user, mastersGroup)
		if err != nil {
			return err
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters[c.name] = &clientcmdapi.Cluster{Server: c.host, CertificateAuthorityData: p.caPEM}
		cfg.AuthInfos[comp.user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
		cfg.Contexts[c.name] = &clientcmdapi.Context{Cluster: c.name, AuthInfo: comp.user}
		cfg.CurrentContext = c.name
		if err := clientcmd.WriteToFile(*cfg, filepath.Join(c.dir, comp.file)); err != nil {
			return err
		}
	}

	scheduler := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 200
  burst: 400
leaderElection:
  leaderElect: false
`, filepath.Join(c.dir, "kube-scheduler.kubeconfig"))
	if err := os.WriteFile(filepath.Join(c.dir, "kube-scheduler.yaml"), []byte(scheduler), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "kwok"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.dir, "kwok.yaml"), kwokConfig, 0o644); err != nil {
		return err
	}

	c.restConfig = &rest.Config{
		Host:            c.host,
		BearerToken:     p.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM},
		// client-go's default of 5 QPS would make tests wait on the client,
		// not on the cluster.
		QPS:   200,
		Burst: 400,
	}
	if c.clientset, err = kubernetes.NewForConfig(c.restConfig); err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	c.probe = &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true},
	}
	return nil
}

// waitHTTP polls url until it answers 200, proc exits or ctx ends.
func (c *Cluster) waitHTTP(ctx context.Context, proc *process, url string) error {
	var last string
	for {
		if exited, err := proc.exited(); exited {
			return fmt.Errorf("%s %w (%v) before %s answered", proc.name, errExited, err, url)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if proc == c.apiserver {
			req.Header.Set("Authorization", "Bearer "+c.pki.AdminToken)
		}
		resp, err := c.probe.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w (last answer: %s)", proc.name, url, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitStarted waits for a component started early, before the apiserver
// was ready: kube-controller-manager gives the apiserver 10 seconds to
// become healthy and exits when it is not (its RBAC bootstrap took longer
// on a loaded two-core machine). The apiserver is ready by now, so one
// that exited is started again, a few times at most.
func (c *Cluster) waitStarted(ctx context.Context, proc *process, url string) error {
	for attempt := 1; ; attempt++ {
		err := c.waitHTTP(ctx, proc, url)
		if !errors.Is(err, errExited) || attempt == 3 {
			return err
		}
		if err := proc.start(); err != nil {
			return err
		}
	}
}

// waitServiceAccount waits for the service-account controller to create the
// default service account in namespace: until it exists, the ServiceAccount
// admission plugin rejects every pod there.
func (c *Cluster) waitServiceAccount(ctx context.Context, namespace string) error {
	for {
		_, err := c.clientset.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("default service account in %s: %w", namespace, err)
		}
		if exited, err := c.controllerManager.exited(); exited {
			return fmt.Errorf("kube-controller-manager %w (%v)", errExited, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("default service account in %s: %w", namespace, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Name is the cluster's name, also its kubeconfig context's.
func (c *Cluster) Name() string { return c.name }

// Dir is the directory holding the cluster's data, configs and logs/.
func (c *Cluster) Dir() string { return c.dir }

// Host is the apiserver's URL, https://127.0.0.1:<port>.
func (c *Cluster) Host() string { return c.host }

// StartupTime is how long StartCluster took, binaries already built.
func (c *Cluster) StartupTime() time.Duration { return c.startup }

// RESTConfig returns a new copy of the admin's client configuration (bearer
// token, CA-verified TLS, 200 QPS).
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Clientset is a client for the admin, who is in system:masters.
func (c *Cluster) Clientset() kubernetes.Interface { return c.clientset }

// Kubeconfig is a kubeconfig for the admin: one cluster, one user and one
// context, all named after the cluster (the user is falcon-admin), with the
// context current.
func (c *Cluster) Kubeconfig() []byte { return append([]byte(nil), c.kubeconfig...) }

// KubeconfigPath is the file holding Kubeconfig.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfigPath }

// Context is the kubeconfig context's name, the cluster's name.
func (c *Cluster) Context() string { return c.name }

// StopAPIServer stops kube-apiserver, leaving etcd, the controllers, the
// scheduler and kwok running, as during an apiserver upgrade. Clients get
// connection refused until StartAPIServer. It sends SIGTERM and, 3s later,
// SIGKILL: a terminating apiserver stops listening at once but would hold
// its clients' open watches for up to a minute.
func (c *Cluster) StopAPIServer() { c.apiserver.stop(3 * time.Second) }

// StartAPIServer starts kube-apiserver again on the same port and data, and
// waits until it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if err := c.apiserver.start(); err != nil {
		return err
	}
	return c.waitHTTP(ctx, c.apiserver, c.host+"/readyz")
}

// Stop stops every component, clients of the apiserver first, and waits for
// their processes to exit. kube-apiserver is killed outright: its graceful
// shutdown takes over a second and buys nothing for a cluster being thrown
// away. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		if c.stalls != nil {
			c.stalls.stop()
		}
		var wg sync.WaitGroup
		for _, p := range []*process{c.kwok, c.scheduler, c.controllerManager} {
			if p != nil {
				wg.Go(func() { p.stop(3 * time.Second) })
			}
		}
		wg.Wait()
		if c.apiserver != nil {
			c.apiserver.stop(0)
		}
		if c.etcd != nil {
			c.etcd.stop(3 * time.Second)
		}
	})
}

// DumpLogs writes the last n lines of each component's log to w.
func (c *Cluster) DumpLogs(w io.Writer, n int) {
	var procs []*process
	for _, p := range []*process{c.etcd, c.apiserver, c.controllerManager, c.scheduler, c.kwok} {
		if p != nil {
			procs = append(procs, p)
		}
	}
	copyTail(w, n, procs...)
}

// handedOut holds every port freePorts has returned in this process, so that
// clusters started concurrently never get the same port while their
// components have yet to bind it.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// freePorts returns n distinct loopback ports that were free a moment ago and
// were not returned before by this process. All listeners are held open
// together so the kernel hands out n different ports.
func freePorts(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for len(ports) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		lns = append(lns, ln)
		port := ln.Addr().(*net.TCPAddr).Port
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			ports = append(ports, port)
		}
	}
	return ports, nil
}
