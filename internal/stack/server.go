package stack

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/cloudlog"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/metrics"
	"github.com/falconhq/falcon/internal/provider/gke"
	"github.com/falconhq/falcon/internal/store/sqlstore"
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
	ArtifactRoot string // gs://bucket[/prefix], file:///dir or an absolute directory; required
	LogDir       string
	// CloudLogging reads GKE jobs' logs from Cloud Logging once their pods
	// and bucket objects are gone.
	CloudLogging bool
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
	// Insecure allows AuthNone, and gRPC without TLS, on a non-loopback
	// address.
	Insecure bool
	// TLSCertFile and TLSKeyFile serve the gRPC port and the HTTP gateway
	// over TLS, re-read when they change (cert-manager rotation).
	TLSCertFile, TLSKeyFile string
	// MetricsAddr serves /metrics, /healthz and /readyz in clear, for
	// Prometheus and the kubelet's probes; empty: not served.
	MetricsAddr string
	// MaxTTL caps experiments' ttl and extends; 0: no cap.
	MaxTTL time.Duration
	// ResultsEvery is how often running experiments' artifact index and
	// metrics are read; 0: apiserver.DefaultResultsEvery.
	ResultsEvery time.Duration
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
//
// It refuses to start on a configuration that could only fail later: no
// artifact root, no controller secret, TLS files that are missing or do
// not match, plaintext gRPC on a non-loopback address (controllers send
// their secret on it), or a database whose schema is behind this binary
// (`falcon migrate` runs first; see docs/operations.md).
func Server(ctx context.Context, cfg ServerConfig) error {
	log := orDiscard(cfg.Log)
	authn, err := serverAuth(ctx, cfg)
	if err != nil {
		return err
	}
	// Checked before anything is opened: without a root, artifacts would
	// get paths nothing can read.
	root, err := blobstore.Parse("--artifact-root", cfg.ArtifactRoot)
	if err != nil {
		return err
	}
	controllers, err := serverControllerSecret(cfg)
	if err != nil {
		return err
	}
	if cfg.MaxTTL < 0 {
		return errdefs.Invalid("--max-ttl", "must be 0 (no cap) or a positive duration such as 24h, got %s", cfg.MaxTTL)
	}
	if cfg.ResultsEvery < 0 {
		return errdefs.Invalid("--results-interval", "must be a positive duration such as 15s, got %s", cfg.ResultsEvery)
	}
	tlsOpt, err := serverTLS(cfg, log)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry()
	st, err := OpenStore(ctx, cfg.DBDriver, cfg.DBDSN, cfg.Migrate, sqlstore.WithTxObserver(metrics.NewStore(reg).ObserveTx))
	if err != nil {
		return err
	}
	defer st.Close()
	schema, err := st.Schema(ctx)
	if err != nil {
		return err
	}
	if err := checkSchema(schema); err != nil {
		return err
	}
	if schema.Ahead() {
		log.Warn("the database was migrated by a newer Falcon; serving it, as migrations only add", "schema", schema.Current, "this_server", schema.Latest)
	}
	extra := []apiserver.Option{apiserver.WithMetrics(reg), apiserver.WithMaxTTL(cfg.MaxTTL), apiserver.WithResultsEvery(cfg.ResultsEvery)}
	if tlsOpt != nil {
		extra = append(extra, tlsOpt)
	}
	if cfg.CloudLogging {
		r, err := cloudlog.New(ctx, nil)
		if err != nil {
			return errdefs.Invalid("--cloud-logging", "cannot create the Cloud Logging client: %v", err)
		}
		defer r.Close()
		extra = append(extra, apiserver.WithCloudLogging(r))
	}
	kc := kubeConfigs(gke.ApplicationDefault)
	srv := apiserver.New(st, append([]apiserver.Option{apiserver.WithLogger(log),
		apiserver.WithAuthenticator(authn), apiserver.WithControllerSecret(controllers),
		apiserver.WithAdmins(auth.NewAdmins(cfg.Admins...)),
		apiserver.WithArtifactRoot(root), apiserver.WithKubeClients(kubeClients(kc)), apiserver.WithKubeConfigs(kc), apiserver.WithLogDir(cfg.LogDir),
		apiserver.WithClusterProber(newProber(kc))}, extra...)...)
	if cfg.Auth == AuthNone {
		log.Warn("authentication is off: every call is attributed to the user running the server", "user", auth.LocalUser().Email)
	}

	ready := &serverReadiness{st: st}
	if cf, ok := authn.(*auth.CloudflareAccess); ok {
		go ready.watchKeys(ctx, cf, log, keyRetry)
	} else {
		ready.keys.Store(true)
	}
	if cfg.MetricsAddr != "" {
		stop, err := serveMetrics(cfg.MetricsAddr, metrics.Handler(reg, ready.check), log)
		if err != nil {
			return err
		}
		defer stop()
	}
	running, err := srv.Serve(ctx, cfg.GRPCAddr, cfg.HTTPAddr)
	if err != nil {
		return err
	}
	ready.serving.Store(true)
	log.Info("falcon server serving", "http", running.HTTPAddr, "grpc", running.GRPCAddr, "tls", tlsOpt != nil,
		"metrics", cfg.MetricsAddr, "auth", cfg.Auth, "admins", len(cfg.Admins), "schema", schema.Current)
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

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return l
}
