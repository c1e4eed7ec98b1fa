package stack

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/cloudlog"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/provider/gke"
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
	// Checked before anything is opened: without a root, artifacts would
	// get paths nothing can read.
	root, err := blobstore.Parse("--artifact-root", cfg.ArtifactRoot)
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
	extra := []apiserver.Option{}
	if cfg.CloudLogging {
		r, err := cloudlog.New(ctx, nil)
		if err != nil {
			return errdefs.Invalid("--cloud-logging", "cannot create the Cloud Logging client: %v", err)
		}
		defer r.Close()
		extra = append(extra, apiserver.WithCloudLogging(r))
	}
	srv := apiserver.New(st, append([]apiserver.Option{apiserver.WithLogger(log),
		apiserver.WithAuthenticator(authn), apiserver.WithControllerSecret(controllers),
		apiserver.WithAdmins(auth.NewAdmins(cfg.Admins...)),
		apiserver.WithArtifactRoot(root), apiserver.WithKubeClients(kubeClients(gke.ApplicationDefault)), apiserver.WithLogDir(cfg.LogDir)}, extra...)...)
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

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return l
}
