package stack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/certfile"
	anactl "github.com/falconhq/falcon/internal/controller/analysis"
	expctl "github.com/falconhq/falcon/internal/controller/exp"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/leader"
	"github.com/falconhq/falcon/internal/probe"
	"github.com/falconhq/falcon/internal/provider/gke"
	"github.com/falconhq/falcon/internal/provider/local"
	"github.com/falconhq/falcon/internal/resourcemanager"
)

// DefaultDrainTimeout is how long a stopping leader lets its cycles in
// flight finish before it cuts them and hands over.
const DefaultDrainTimeout = 30 * time.Second

// ControllerConfig configures `falcon controller`.
type ControllerConfig struct {
	Server   string // the API server's gRPC address
	DataDir  string // for the local backend
	Interval time.Duration
	// LocalCluster, if set, registers a cluster of that name whose jobs run
	// as processes on this controller's machine.
	LocalCluster string
	// ControllerSecret is the secret shared with the API server; required.
	ControllerSecret string
	Log              *slog.Logger
	GKE              GKEConfig
	// Retry paces the retries of failing dispatches and stops; zero
	// policies are resourcemanager.DefaultRetry's.
	Retry resourcemanager.Retry
	// MetricsAddr serves /metrics, /healthz and /readyz; empty: not served.
	MetricsAddr string
	// Elector picks the one replica that reconciles; nil: this one, at
	// once (leader.Always). See LeaderConfig.Elector.
	Elector leader.Elector
	// DrainTimeout bounds the drain on a graceful stop; 0 is
	// DefaultDrainTimeout.
	DrainTimeout time.Duration
	// APICAFile is the CA bundle that signed the API server's certificate
	// (the system's roots when empty) and APIServerName the name to check
	// it against (the host of Server when empty). Either one turns TLS on;
	// so does a Server that is not loopback.
	APICAFile, APIServerName string
	// Insecure allows plaintext to a Server that is not loopback.
	Insecure bool
}

// controllerTLS is how the controller reaches the API server: TLS unless
// the server is on loopback and no TLS flag was given. The controller
// secret never crosses a network in clear text unless --insecure says so.
func controllerTLS(cfg ControllerConfig) (*tls.Config, error) {
	if cfg.APICAFile == "" && cfg.APIServerName == "" && (isLoopback(cfg.Server) || cfg.Insecure) {
		return nil, nil
	}
	return certfile.ClientConfig("--api-ca-file", cfg.APICAFile, cfg.APIServerName)
}

// loop is one of the controller's reconcile loops. It drains like an
// http.Server: Shutdown stops it starting cycles and waits for the one in
// flight, or for its ctx; cancelling Run's ctx cuts the cycle.
type loop interface {
	Run(ctx context.Context) error
	Shutdown(ctx context.Context) error
}

var _ loop = (*expctl.Controller)(nil)

var _ loop = (*resourcemanager.Manager)(nil)

var _ loop = (*anactl.Controller)(nil)

var _ loop = (*probe.Loop)(nil)

// Controller runs the expController and the resource manager against an API
// server until ctx is done, while cfg.Elector says this replica leads.
//
// A standby runs no loop; it serves /healthz, /readyz ("ok: standby") and
// /metrics (falcon_leader 0). When ctx ends, the leader drains for up to
// DrainTimeout, still holding leadership: each loop that can (see loop)
// starts no new cycle and finishes the one in flight; then the loops are
// cancelled, the backends stopped, and only then does the elector release.
func Controller(ctx context.Context, cfg ControllerConfig) error {
	log := orDiscard(cfg.Log)
	if cfg.Server == "" {
		return errors.New("the API server's gRPC address is required")
	}
	if cfg.ControllerSecret == "" {
		return errdefs.Invalid("--controller-token-file", "is required (or set FALCON_CONTROLLER_TOKEN): the secret the API server was given")
	}
	if _, err := auth.NewControllerSecret(cfg.ControllerSecret); err != nil {
		return errdefs.Invalid("--controller-token-file", "%v", err)
	}
	if cfg.DrainTimeout < 0 {
		return errdefs.Invalid("--drain-timeout", "must not be negative, got %s", cfg.DrainTimeout)
	}
	tc, err := controllerTLS(cfg)
	if err != nil {
		return err
	}
	conn, err := dial(cfg.Server, cfg.ControllerSecret, tc)
	if err != nil {
		return err
	}
	defer conn.Close()
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	elector := cfg.Elector
	if elector == nil {
		elector = leader.Always{}
	}
	obs := newObservability(cfg.Interval)
	obs.setLeading(false)

	// Probes and metrics outlive ctx: they answer through the drain.
	if cfg.MetricsAddr != "" {
		stop, err := serveMetrics(cfg.MetricsAddr, obs.handler(), log)
		if err != nil {
			return err
		}
		defer stop()
	}

	t := &controllerTerm{cfg: cfg, conn: conn, obs: obs, log: log}
	var termErr error
	err = elector.Run(ctx, func(held context.Context) {
		termErr = t.lead(ctx, held)
		if termErr != nil && ctx.Err() == nil {
			log.Error("controller term failed; handing leadership back", "err", termErr)
		}
	})
	return errors.Join(err, termErr)
}

// controllerTerm is what a replica does while it leads.
type controllerTerm struct {
	cfg  ControllerConfig
	conn *grpc.ClientConn
	obs  *observability
	log  *slog.Logger
}

// lead runs one term until stop (the process is stopping) or held (this
// replica lost leadership) ends. Everything with memory across cycles (the
// local executor, the backends' informers, the resource manager) is built
// afresh each term: a replica leading again must not act on what it
// remembered from before another replica led.
//
// Steps:
//  1. register the local cluster, if any, and open the local executor,
//     waiting while a previous term on this machine still holds its data
//     dir; adopt the jobs it left running (Recover);
//  2. run the resource manager and the expController;
//  3. on stop: Shutdown every loop within DrainTimeout (leadership is held
//     meanwhile), then cancel them; on lost leadership: cancel at once;
//  4. stop the backends and the executor; return, and the elector releases.
func (t *controllerTerm) lead(stop, held context.Context) error {
	t.obs.setLeading(true)
	defer t.obs.setLeading(false)
	log := t.log
	log.Info("leading: starting the controllers")
	defer log.Info("no longer leading: controllers stopped")
	// Setup and the loops run on work, which outlives stop so the drain
	// can finish, and ends with leadership.
	work, cut := context.WithCancel(held)
	defer cut()

	cfg := t.cfg
	if cfg.LocalCluster != "" {
		if _, err := falconv1.NewClusterServiceClient(t.conn).RegisterCluster(work, &falconv1.RegisterClusterRequest{
			Cluster: &falconv1.Cluster{Name: cfg.LocalCluster, Backend: local.BackendName, Location: "localhost"},
		}); err != nil {
			if work.Err() != nil || stop.Err() != nil {
				return nil
			}
			return fmt.Errorf("register local cluster %s: %w", cfg.LocalCluster, err)
		}
	}
	var mgr *resourcemanager.Manager
	exec, err := t.openExecutor(stop, work, func(id string) {
		if mgr != nil {
			mgr.Touch(id)
		}
	})
	if err != nil || exec == nil {
		return err
	}
	defer func() {
		// Ranks keep running; the next term, here or on another replica
		// sharing the data dir, adopts them.
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := exec.Shutdown(sctx); err != nil {
			log.Warn("stopping the local executor", "err", err)
		}
	}()
	if _, err := exec.Recover(work); err != nil {
		if work.Err() != nil {
			return nil
		}
		return err
	}
	mgr, closeBackends := newManager(t.conn, exec, log, cfg.Interval, cfg.GKE, cfg.Retry, t.obs.rm)
	defer closeBackends()
	t.obs.mgr.Store(mgr)
	defer t.obs.mgr.Store(nil)
	ec := expctl.New(t.conn, expctl.WithLogger(log), expctl.WithInterval(cfg.Interval))
	ac := anactl.New(t.conn, anactl.WithLogger(log), anactl.WithInterval(cfg.Interval))
	connect := cfg.GKE.Connect
	if connect == nil {
		connect = gke.ApplicationDefault
	}
	pl := probe.NewLoop(t.conn, newProber(kubeConfigs(connect)), xpkCredentials(), 0, log)
	loops := []loop{mgr, ec, ac, pl}

	failed := make(chan error, len(loops))
	var running sync.WaitGroup
	for _, l := range loops {
		running.Go(func() {
			if err := l.Run(work); err != nil {
				failed <- err
			}
		})
	}
	var termErr error
	select {
	case <-stop.Done():
		log.Info("stopping: draining the cycles in flight", "timeout", cfg.DrainTimeout)
		t.drain(held, loops)
	case <-held.Done():
		log.Warn("leadership lost: stopping the controllers at once", "cause", context.Cause(held))
	case termErr = <-failed:
	}
	cut()
	running.Wait()
	return termErr
}

// drain shuts the loops down side by side within DrainTimeout, cut short
// if leadership goes (held ends).
func (t *controllerTerm) drain(held context.Context, loops []loop) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(held, t.cfg.DrainTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var timedOut sync.Once
	for _, l := range loops {
		wg.Go(func() {
			if err := l.Shutdown(ctx); err != nil {
				timedOut.Do(func() {
					t.log.Warn("drain cut short: cancelling the cycle in flight", "err", err, "after", time.Since(start))
				})
			}
		})
	}
	wg.Wait()
	t.log.Info("drained", "took", time.Since(start).Round(time.Millisecond))
}

// openExecutor opens the local executor on the data dir, retrying while
// another process (a previous leader on this machine, still stopping)
// may hold it: for as long as a term takes to stop. A nil executor with no
// error means the term ended first.
func (t *controllerTerm) openExecutor(stop, work context.Context, onExit func(string)) (*local.Executor, error) {
	giveUp := time.Now().Add(t.cfg.DrainTimeout + 15*time.Second)
	for {
		exec, err := local.New(t.cfg.DataDir, local.WithLogger(t.log), local.WithOnExit(onExit))
		if err == nil {
			return exec, nil
		}
		if time.Now().After(giveUp) {
			return nil, fmt.Errorf("local backend: %w", err)
		}
		t.log.Warn("local backend: cannot open the data dir yet; retrying", "err", err)
		select {
		case <-stop.Done():
			return nil, nil
		case <-work.Done():
			return nil, nil
		case <-time.After(time.Second):
		}
	}
}
