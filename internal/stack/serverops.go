package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/certfile"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store/sqlstore"
)

// serverControllerSecret is the secret controllers must present.
func serverControllerSecret(cfg ServerConfig) (*auth.ControllerSecret, error) {
	if cfg.ControllerSecret == "" {
		return nil, errdefs.Invalid("--controller-token-file", "is required (or set FALCON_CONTROLLER_TOKEN): the secret Falcon's controllers present")
	}
	c, err := auth.NewControllerSecret(cfg.ControllerSecret)
	if err != nil {
		return nil, errdefs.Invalid("--controller-token-file", "%v", err)
	}
	return c, nil
}

// serverTLS loads the server's certificate, or checks that going without
// one is safe: controllers send their secret on the gRPC port, so it is
// served in clear on loopback only (falcon dev, a sidecar) unless
// --insecure. nil: no TLS.
func serverTLS(cfg ServerConfig, log *slog.Logger) (apiserver.Option, error) {
	if cfg.TLSCertFile == "" && cfg.TLSKeyFile == "" {
		if !cfg.Insecure && !isLoopback(cfg.GRPCAddr) {
			return nil, errdefs.Invalid("--tls-cert-file", "is required when --grpc-addr %q is not loopback: controllers send their secret on that port (give --tls-cert-file and --tls-key-file, or pass --insecure to serve it in clear text)", cfg.GRPCAddr)
		}
		return nil, nil
	}
	r, err := certfile.NewReloader(cfg.TLSCertFile, cfg.TLSKeyFile, certfile.WithLogger(log))
	if err != nil {
		return nil, err
	}
	return apiserver.WithTLS(r.ServerConfig()), nil
}

// isLoopback reports whether addr (host:port) listens on loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkSchema refuses a database this binary would fail on mid-request.
func checkSchema(s sqlstore.Schema) error {
	if s.Behind() {
		return errdefs.Invalid("--migrate", "the database schema is at version %d and this server needs %d: run `falcon migrate` first (or pass --migrate)", s.Current, s.Latest)
	}
	return nil
}

// keyRetry paces the retries of a failed fetch of the team's signing keys.
var keyRetry = struct{ first, max time.Duration }{first: time.Second, max: time.Minute}

// serverReadiness answers /readyz: serving, the team's signing keys
// fetched once (without them every call is refused), and the database
// answering.
type serverReadiness struct {
	st      *sqlstore.Store
	serving atomic.Bool
	keys    atomic.Bool
	keysErr atomic.Pointer[error]
}

func (r *serverReadiness) check() (string, error) {
	if !r.serving.Load() {
		return "", errors.New("starting")
	}
	if !r.keys.Load() {
		err := errors.New("the team's signing keys have not been fetched yet")
		if e := r.keysErr.Load(); e != nil {
			err = *e
		}
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.st.Ping(ctx); err != nil {
		return "", err
	}
	return "server", nil
}

// watchKeys fetches the team's signing keys until it succeeds once. The
// server serves meanwhile, but not ready, and refuses every token, as it
// would anyway without keys: it never serves without verification. After
// the first success go-oidc refetches on its own when keys rotate.
func (r *serverReadiness) watchKeys(ctx context.Context, cf *auth.CloudflareAccess, log *slog.Logger, pace struct{ first, max time.Duration }) {
	wait := pace.first
	for {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := cf.CheckKeys(fctx)
		cancel()
		if err == nil {
			r.keys.Store(true)
			log.Info("fetched the team's signing keys", "url", cf.CertsURL(), "keys", n)
			return
		}
		if ctx.Err() != nil {
			return
		}
		err = fmt.Errorf("--cf-team-domain: %w; every call is refused until they can be fetched (retrying in %s)", err, wait)
		r.keysErr.Store(&err)
		log.Error("cannot verify tokens yet", "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, pace.max)
	}
}

// serveMetrics serves h on addr until the returned stop is called.
func serveMetrics(addr string, h http.Handler, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	})
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		wg.Wait()
	}, nil
}
