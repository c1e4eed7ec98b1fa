package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	expctl "github.com/falconhq/falcon/internal/controller/exp"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/provider/local"
	"github.com/falconhq/falcon/internal/resourcemanager"
)

// How `falcon server` identifies callers.
const (
	// AuthCloudflare verifies Cloudflare Access tokens on every call.
	AuthCloudflare = "cloudflare"
	// AuthNone attributes every call to the OS user running the server,
	// like `falcon dev`; it is refused on non-loopback addresses unless
	// Insecure is set.
	AuthNone = "none"
)

// ServerConfig configures `falcon server`.
type ServerConfig struct {
	DBDriver     string // "mysql" or "sqlite"
	DBDSN        string
	Migrate      bool // apply migrations before serving
	HTTPAddr     string
	GRPCAddr     string
	ArtifactRoot string // gs://bucket, or a directory
	LogDir       string
	Log          *slog.Logger

	Auth string // AuthCloudflare or AuthNone
	// CFTeamDomain and CFAudience say which Cloudflare Access tokens are
	// accepted: the team (myteam, or myteam.cloudflareaccess.com) and the
	// application's AUD tag.
	CFTeamDomain string
	CFAudience   string
	// Admins may abort and delete anyone's experiments (emails).
	Admins []string
	// ControllerSecret is the secret controllers present; required.
	ControllerSecret string
	// Insecure allows AuthNone on a non-loopback address.
	Insecure bool
	// Ready, if set, is called once the API is serving.
	Ready func(httpAddr, grpcAddr string)
}

// serverAuth builds the authenticator cfg asks for.
func serverAuth(ctx context.Context, cfg ServerConfig) (auth.Authenticator, error) {
	switch cfg.Auth {
	case AuthCloudflare:
		issuer, err := auth.TeamIssuer(cfg.CFTeamDomain)
		if err != nil {
			return nil, errdefs.Invalid("--cf-team-domain", "%v", err)
		}
		if cfg.CFAudience == "" {
			return nil, errdefs.Invalid("--cf-audience", "is required with --auth cloudflare: the AUD tag of the Access application")
		}
		return auth.NewCloudflareAccess(ctx, auth.CloudflareConfig{Issuer: issuer, Audience: cfg.CFAudience})
	case AuthNone:
		if err := checkLoopback("--http-addr", cfg.HTTPAddr, cfg.Insecure, "falcon server --auth none"); err != nil {
			return nil, err
		}
		if err := checkLoopback("--grpc-addr", cfg.GRPCAddr, cfg.Insecure, "falcon server --auth none"); err != nil {
			return nil, err
		}
		return auth.Local{P: auth.LocalUser()}, nil
	}
	return nil, errdefs.Invalid("--auth", "%q is not supported; allowed: %s, %s", cfg.Auth, AuthCloudflare, AuthNone)
}

// Server runs the API server until ctx is done.
func Server(ctx context.Context, cfg ServerConfig) error {
	log := orDiscard(cfg.Log)
	authn, err := serverAuth(ctx, cfg)
	if err != nil {
		return err
	}
	if cfg.ControllerSecret == "" {
		return errdefs.Invalid("--controller-token-file", "is required (or set FALCON_CONTROLLER_TOKEN): the secret Falcon's controllers present")
	}
	controllers, err := auth.NewControllerSecret(cfg.ControllerSecret)
	if err != nil {
		return errdefs.Invalid("--controller-token-file", "%v", err)
	}
	st, err := OpenStore(ctx, cfg.DBDriver, cfg.DBDSN, cfg.Migrate)
	if err != nil {
		return err
	}
	defer st.Close()
	srv := apiserver.New(st, apiserver.WithLogger(log),
		apiserver.WithAuthenticator(authn), apiserver.WithControllerSecret(controllers),
		apiserver.WithAdmins(auth.NewAdmins(cfg.Admins...)),
		apiserver.WithArtifactRoot(cfg.ArtifactRoot), apiserver.WithLogDir(cfg.LogDir))
	if cfg.Auth == AuthNone {
		log.Warn("authentication is off: every call is attributed to the user running the server", "user", auth.LocalUser().Email)
	}
	running, err := srv.Serve(ctx, cfg.GRPCAddr, cfg.HTTPAddr)
	if err != nil {
		return err
	}
	log.Info("falcon server serving", "http", running.HTTPAddr, "grpc", running.GRPCAddr, "auth", cfg.Auth, "admins", len(cfg.Admins))
	if cfg.Ready != nil {
		cfg.Ready(running.HTTPAddr, running.GRPCAddr)
	}
	return running.Wait()
}

// Migrate applies the store's migrations.
func Migrate(ctx context.Context, driver, dsn string) (version int64, err error) {
	st, err := OpenStore(ctx, driver, dsn, true)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	return st.SchemaVersion(ctx)
}

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
	// MetricsAddr serves /metrics, /healthz and /readyz; empty: not served.
	MetricsAddr string
}

// Controller runs the expController and the resource manager against an API
// server until ctx is done.
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
	conn, err := dial(cfg.Server, cfg.ControllerSecret)
	if err != nil {
		return err
	}
	defer conn.Close()
	if cfg.LocalCluster != "" {
		if _, err := falconv1.NewClusterServiceClient(conn).RegisterCluster(ctx, &falconv1.RegisterClusterRequest{
			Cluster: &falconv1.Cluster{Name: cfg.LocalCluster, Backend: local.BackendName, Location: "localhost"},
		}); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while registering
			}
			return fmt.Errorf("register local cluster %s: %w", cfg.LocalCluster, err)
		}
	}
	var mgr *resourcemanager.Manager
	exec, err := local.New(cfg.DataDir, local.WithLogger(log), local.WithOnExit(func(string) {
		if mgr != nil {
			mgr.Wake()
		}
	}))
	if err != nil {
		return fmt.Errorf("local backend: %w", err)
	}
	if _, err := exec.Recover(ctx); err != nil {
		return err
	}
	interval := cfg.Interval
	if interval == 0 {
		interval = 5 * time.Second
	}
	obs := newObservability(interval)
	mgr, closeBackends := newManager(conn, exec, log, interval, cfg.GKE, obs.rm)
	defer closeBackends()
	obs.mgr.Store(mgr)
	ec := expctl.New(conn, expctl.WithLogger(log), expctl.WithInterval(interval))
	g, gctx := errgroup.WithContext(ctx)
	if cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen for metrics on %s: %w", cfg.MetricsAddr, err)
		}
		hs := &http.Server{Handler: obs.handler(), ReadHeaderTimeout: 10 * time.Second}
		g.Go(func() error {
			if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return hs.Shutdown(sctx)
		})
	}
	g.Go(func() error { return mgr.Run(gctx) })
	g.Go(func() error { return ec.Run(gctx) })
	err = g.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = exec.Shutdown(sctx)
	return err
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return l
}
