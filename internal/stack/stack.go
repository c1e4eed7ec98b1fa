package stack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/changefeed"
	anactl "github.com/falconhq/falcon/internal/controller/analysis"
	expctl "github.com/falconhq/falcon/internal/controller/exp"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/metrics"
	"github.com/falconhq/falcon/internal/probe"
	"github.com/falconhq/falcon/internal/provider/gke"
	"github.com/falconhq/falcon/internal/provider/kube"
	"github.com/falconhq/falcon/internal/provider/local"
	xpkprovider "github.com/falconhq/falcon/internal/provider/xpk"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/sim"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/xpk"
)

// Default addresses of `falcon dev`; the CLI's default --server matches.
const (
	DefaultDevHTTPAddr = "127.0.0.1:7070"
	DefaultDevGRPCAddr = "127.0.0.1:7071"
	LocalClusterName   = "local"
)

// DevConfig configures `falcon dev`.
type DevConfig struct {
	DataDir  string
	HTTPAddr string
	GRPCAddr string
	// Interval is the controllers' safety-net poll; changes wake them at once.
	Interval time.Duration
	// Insecure allows listening on a non-loopback address without auth.
	Insecure bool
	// Pprof serves Go's profiler at /debug/pprof/ on the HTTP address.
	Pprof bool
	Log   *slog.Logger
	// Ready, if set, is called once the API is serving.
	Ready func(httpAddr, grpcAddr string)
	GKE   GKEConfig
	// MaxTTL caps experiments' ttl and extends; 0: no cap.
	MaxTTL time.Duration
	// ResultsEvery is how often running experiments' artifact index and
	// metrics are read; 0: apiserver.DefaultResultsEvery.
	ResultsEvery time.Duration
	// Retry paces the retries of failing dispatches and stops; zero
	// policies are resourcemanager.DefaultRetry's.
	Retry resourcemanager.Retry
}

// GKEConfig configures the gke backend.
type GKEConfig struct {
	// Connect makes the Google API clients; default Application Default
	// Credentials. Tests point it at wire-protocol test servers.
	Connect gke.Connector
	// PoolOptions tune the node pool manager (scale-down times, timeouts).
	PoolOptions []gke.Option
	// PoolTiming paces the resource manager's pool work; nil is the default.
	PoolTiming *resourcemanager.PoolTiming
	// PoolPolicy is the pool rule (--pool-policy: per-job, linger=DUR,
	// cap=N); the zero Policy is 000's.
	PoolPolicy sim.Policy
}

// devConnect is how falcon dev reaches the GKE API: the configured
// connector, else Application Default Credentials.
func devConnect(gc GKEConfig) gke.Connector {
	if gc.Connect != nil {
		return gc.Connect
	}
	return gke.ApplicationDefault
}

// pprofHandler mounts Go's profiler when on: dev is loopback-only, so the
// profiler is no wider exposure than the API itself.
func pprofHandler(on bool) apiserver.Option {
	if !on {
		return func(*apiserver.Server) {}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return apiserver.WithHTTPHandler("/debug/pprof/", mux)
}

// observability is a controller's metrics and readiness.
type observability struct {
	reg      *prometheus.Registry
	rm       *metrics.RM
	leader   prometheus.Gauge
	leading  atomic.Bool
	mgr      atomic.Pointer[resourcemanager.Manager] // set while leading
	maxCycle time.Duration
}

func newObservability(interval time.Duration) *observability {
	reg := metrics.NewRegistry()
	// A cycle runs at least every interval; two missed ones and a margin
	// for a slow API server mean the controller is stuck or cut off.
	return &observability{reg: reg, rm: metrics.NewRM(reg), leader: metrics.NewLeader(reg), maxCycle: 2*interval + 10*time.Second}
}

// setLeading records whether this replica leads (runs the loops).
func (o *observability) setLeading(on bool) {
	o.leading.Store(on)
	if on {
		o.leader.Set(1)
	} else {
		o.leader.Set(0)
	}
}

// handler serves /metrics, /healthz and /readyz. A standby is ready: it
// does what it should (wait to take over), and a rolling update must not
// stall on it; it answers "ok: standby". The leader answers "ok: leader"
// while its resource manager completes cycles, 503 otherwise.
func (o *observability) handler() http.Handler {
	return metrics.Handler(o.reg, func() (string, error) {
		if !o.leading.Load() {
			return "standby", nil
		}
		m := o.mgr.Load()
		if m == nil {
			return "", errors.New("the resource manager is starting")
		}
		return "leader", m.Ready(o.maxCycle)
	})
}

// newManager assembles the resource manager with every backend: local
// processes, Kubernetes clusters and GKE clusters. The returned func stops
// the backends' informers.
func newManager(conn *grpc.ClientConn, exec *local.Executor, log *slog.Logger, interval time.Duration, gc GKEConfig, retry resourcemanager.Retry, rm *metrics.RM) (*resourcemanager.Manager, func()) {
	var mgr *resourcemanager.Manager
	wake := func() {
		if mgr != nil {
			mgr.Wake()
		}
	}
	touch := func(id string) {
		if mgr != nil {
			mgr.Touch(id)
		}
	}
	kb := kube.New(kube.WithLogger(log), kube.WithOnChange(wake), kube.WithOnJobChange(touch))
	connect := gc.Connect
	if connect == nil {
		connect = gke.ApplicationDefault
	}
	gb := gke.NewBackend(connect, []kube.Option{kube.WithLogger(log), kube.WithOnChange(wake), kube.WithOnJobChange(touch)}, gc.PoolOptions...)
	opts := []resourcemanager.Option{resourcemanager.WithLogger(log), resourcemanager.WithInterval(interval), resourcemanager.WithMetrics(rm),
		resourcemanager.WithRetry(retry),
		resourcemanager.WithBackend(local.BackendName, local.NewBackend(exec)),
		resourcemanager.WithBackend(kube.BackendName, kb),
		resourcemanager.WithBackend(gke.BackendName, gb),
		resourcemanager.WithBackend(xpkprovider.BackendName, xpkprovider.New(xpk.New(), xpkCredentials(), xpkprovider.WithLogger(log)))}
	if gc.PoolTiming != nil {
		opts = append(opts, resourcemanager.WithPoolTiming(*gc.PoolTiming))
	}
	opts = append(opts, gc.PoolPolicy.ManagerOptions()...)
	mgr = resourcemanager.New(conn, opts...)
	return mgr, func() { kb.Close(); gb.Close() }
}

// Dev runs the whole of Falcon in this process until ctx is done.
func Dev(ctx context.Context, cfg DevConfig) error {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := checkLoopback("--http-addr", cfg.HTTPAddr, cfg.Insecure, "falcon dev"); err != nil {
		return err
	}
	if err := checkLoopback("--grpc-addr", cfg.GRPCAddr, cfg.Insecure, "falcon dev"); err != nil {
		return err
	}
	if cfg.MaxTTL < 0 {
		return errdefs.Invalid("--max-ttl", "must be 0 (no cap) or a positive duration such as 24h, got %s", cfg.MaxTTL)
	}
	if cfg.ResultsEvery < 0 {
		return errdefs.Invalid("--results-interval", "must be a positive duration such as 15s, got %s", cfg.ResultsEvery)
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	unlock, err := lockDir(dataDir)
	if err != nil {
		return err
	}
	defer unlock()

	interval := cfg.Interval
	if interval == 0 {
		interval = 2 * time.Second
	}
	obs := newObservability(interval)
	st, err := OpenStore(ctx, "sqlite", sqlstore.SQLiteDSN(filepath.Join(dataDir, "falcon.db")), true,
		sqlstore.WithTxObserver(metrics.NewStore(obs.reg).ObserveTx))
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.UpsertCluster(ctx, &store.Cluster{
		ID: ids.New(ids.Cluster), Name: LocalClusterName, Backend: local.BackendName,
		Location: "localhost", Status: store.ClusterActive, CreatedAt: time.Now().UTC(),
	}); err != nil {
		return fmt.Errorf("register the local cluster: %w", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The in-process controllers still present a controller secret, as in
	// production; it lives only as long as this process.
	secret := auth.GenerateControllerSecret()
	controllers, err := auth.NewControllerSecret(secret)
	if err != nil {
		return err
	}
	obs.setLeading(true) // one process, no election
	feed := changefeed.New()
	root, err := blobstore.Parse("--data-dir", dataDir)
	if err != nil {
		return err
	}
	// The executor comes before the server, which execs beside its ranks;
	// its ranks are adopted (Recover) once the server serves.
	var mgr *resourcemanager.Manager
	exec, err := local.New(dataDir, local.WithLogger(log), local.WithOnExit(func(id string) {
		if mgr != nil {
			mgr.Touch(id)
		}
	}))
	if err != nil {
		return err
	}
	kc := kubeConfigs(devConnect(cfg.GKE))
	prober := newProber(kc)
	srv := apiserver.New(st, apiserver.WithControllerSecret(controllers), apiserver.WithClusterProber(prober),
		apiserver.WithFeed(feed), apiserver.WithLogger(log),
		apiserver.WithArtifactRoot(root), apiserver.WithLogDir(filepath.Join(dataDir, "logs")),
		apiserver.WithKubeClients(kubeClients(kc)), apiserver.WithKubeConfigs(kc),
		apiserver.WithLocalExec(exec), apiserver.WithReplicaPoll(0), // alone on its data dir
		apiserver.WithMetrics(obs.reg), apiserver.WithMaxTTL(cfg.MaxTTL), apiserver.WithResultsEvery(cfg.ResultsEvery),
		apiserver.WithHTTPHandler("/metrics", obs.handler()), apiserver.WithHTTPHandler("/readyz", obs.handler()),
		pprofHandler(cfg.Pprof))
	running, err := srv.Serve(ctx, cfg.GRPCAddr, cfg.HTTPAddr)
	if err != nil {
		_ = exec.Close()
		return err
	}
	if lost, err := exec.Recover(ctx); err != nil {
		return fmt.Errorf("recover local jobs: %w", err)
	} else if len(lost) > 0 {
		log.Warn("jobs whose processes did not survive the restart will be failed", "jobs", lost)
	}

	conn, err := dial(running.GRPCAddr, secret, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	mgr, closeBackends := newManager(conn, exec, log, interval, cfg.GKE, cfg.Retry, obs.rm)
	defer closeBackends()
	obs.mgr.Store(mgr)
	ec := expctl.New(conn, expctl.WithLogger(log), expctl.WithInterval(interval))
	ac := anactl.New(conn, anactl.WithLogger(log), anactl.WithInterval(interval))

	if cfg.Ready != nil {
		cfg.Ready(running.HTTPAddr, running.GRPCAddr)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return mgr.Run(gctx) })
	g.Go(func() error { return ec.Run(gctx) })
	g.Go(func() error { return ac.Run(gctx) })
	g.Go(func() error { return probe.NewLoop(conn, prober, xpkCredentials(), 0, log).Run(gctx) })
	g.Go(func() error {
		err := running.Wait()
		cancel()
		return err
	})
	err = g.Wait()
	// Local jobs keep running under their supervisors, which record how
	// they end; the next start adopts them. Shutdown only stops watching and
	// releases the data dir.
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	if serr := exec.Shutdown(sctx); serr != nil {
		log.Warn("releasing local jobs", "err", serr)
	}
	return err
}

// OpenStore opens the store and, if migrate is set, applies migrations.
func OpenStore(ctx context.Context, driver, dsn string, migrate bool, opts ...sqlstore.Option) (*sqlstore.Store, error) {
	st, err := sqlstore.Open(ctx, driver, dsn, opts...)
	if err != nil {
		return nil, fmt.Errorf("open %s store: %w", driver, err)
	}
	if migrate {
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			return nil, fmt.Errorf("migrate %s store: %w", driver, err)
		}
	}
	return st, nil
}

// dial connects a controller to the API server's gRPC address, presenting
// the controller secret on every call; over TLS with tc, in clear when tc
// is nil.
func dial(addr, controllerSecret string, tc *tls.Config) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	return grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(auth.ControllerCredentials(controllerSecret)))
}

// checkLoopback refuses to expose an unauthenticated API (of what, e.g.
// "falcon dev") beyond this machine; flag names the address's flag.
func checkLoopback(flag, addr string, insecureOK bool, what string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return errdefs.Invalid(flag, "%q: %v", addr, err)
	}
	if insecureOK || isLoopback(addr) {
		return nil
	}
	return errdefs.Invalid(flag, "%q is not loopback: %s has no authentication, so it listens on 127.0.0.1 only (pass --insecure to override)", addr, what)
}

// lockDir takes an exclusive lock on the data dir so two `falcon dev`
// processes never run the same jobs twice.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "falcon.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by another falcon dev", dir)
		}
		return nil, err
	}
	return func() { f.Close() }, nil
}
