package stack

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"time"

	"gocloud.dev/blob"

	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/certfile"
	"github.com/falconhq/falcon/internal/errdefs"
)

// Check is one finding of CheckServerConfig: what was checked, what was
// found, and the error if it is not fit to serve.
type Check struct {
	Name   string
	Detail string
	Err    error
}

// checkTimeout bounds each check that reaches over the network.
const checkTimeout = 10 * time.Second

// CheckServerConfig checks what `falcon server` would need to serve with
// cfg, without serving: the controller secret, TLS files, authentication
// (the team's signing keys can be fetched), the database and its schema,
// and the artifact root. Every check runs, so one run reports every
// problem; CI/CD runs it as a gate before a rollout.
func CheckServerConfig(ctx context.Context, cfg ServerConfig) []Check {
	return []Check{
		checkControllerSecret(cfg),
		checkTLS(cfg),
		checkAuth(ctx, cfg),
		checkDatabase(ctx, cfg),
		checkArtifactRoot(ctx, cfg),
	}
}

func checkControllerSecret(cfg ServerConfig) Check {
	c := Check{Name: "controller secret"}
	if _, c.Err = serverControllerSecret(cfg); c.Err == nil {
		c.Detail = "set"
	}
	return c
}

func checkTLS(cfg ServerConfig) Check {
	c := Check{Name: "tls"}
	if cfg.TLSCertFile == "" && cfg.TLSKeyFile == "" {
		if _, c.Err = serverTLS(cfg, nil); c.Err == nil {
			c.Detail = fmt.Sprintf("off: gRPC %s and HTTP %s in clear text", cfg.GRPCAddr, cfg.HTTPAddr)
		}
		return c
	}
	r, err := certfile.NewReloader(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		c.Err = err
		return c
	}
	leaf := r.Certificate().Leaf
	left := time.Until(leaf.NotAfter)
	if left <= 0 {
		c.Err = errdefs.Invalid("--tls-cert-file", "%s expired at %s", cfg.TLSCertFile, leaf.NotAfter.UTC().Format(time.RFC3339))
		return c
	}
	c.Detail = fmt.Sprintf("%s for %v, valid until %s (%d days)", cfg.TLSCertFile, append(leaf.DNSNames, ipStrings(leaf)...),
		leaf.NotAfter.UTC().Format(time.RFC3339), int(left.Hours()/24))
	return c
}

func checkAuth(ctx context.Context, cfg ServerConfig) Check {
	c := Check{Name: "auth"}
	authn, err := serverAuth(ctx, cfg)
	if err != nil {
		c.Err = err
		return c
	}
	cf, ok := authn.(*auth.CloudflareAccess)
	if !ok {
		c.Detail = fmt.Sprintf("none: every call is attributed to %s", auth.LocalUser().Email)
		return c
	}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	n, err := cf.CheckKeys(cctx)
	if err != nil {
		c.Err = errdefs.Invalid("--cf-team-domain", "%v", err)
		return c
	}
	c.Detail = fmt.Sprintf("cloudflare: %d signing keys at %s", n, cf.CertsURL())
	return c
}

func checkDatabase(ctx context.Context, cfg ServerConfig) Check {
	c := Check{Name: "database"}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	st, err := OpenStore(cctx, cfg.DBDriver, cfg.DBDSN, false)
	if err != nil {
		c.Err = err
		return c
	}
	defer st.Close()
	s, err := st.Schema(cctx)
	if err != nil {
		c.Err = err
		return c
	}
	if c.Err = checkSchema(s); c.Err != nil && cfg.Migrate {
		// --migrate would bring it up to date before serving.
		c.Err = nil
		c.Detail = fmt.Sprintf("%s reachable; schema at version %d, --migrate applies up to %d", cfg.DBDriver, s.Current, s.Latest)
		return c
	}
	if c.Err == nil {
		c.Detail = fmt.Sprintf("%s reachable; schema at version %d (this server's: %d)", cfg.DBDriver, s.Current, s.Latest)
	}
	return c
}

func checkArtifactRoot(ctx context.Context, cfg ServerConfig) Check {
	c := Check{Name: "artifact root"}
	root, err := blobstore.Parse("--artifact-root", cfg.ArtifactRoot)
	if err != nil {
		c.Err = err
		return c
	}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	o := blobstore.NewOpener()
	defer o.Close()
	b, err := o.Bucket(cctx, root)
	if err != nil {
		c.Err = fmt.Errorf("--artifact-root: %w", err)
		return c
	}
	// Listing one key proves the bucket exists and the server's identity
	// may read it, which is what serving artifacts needs.
	if _, err := b.List(&blob.ListOptions{Prefix: root.Prefix}).Next(cctx); err != nil && !errors.Is(err, io.EOF) {
		c.Err = fmt.Errorf("--artifact-root: %w", blobstore.Err("list "+root.String(), err))
		return c
	}
	c.Detail = fmt.Sprintf("%s readable", root)
	return c
}

func ipStrings(c *x509.Certificate) []string {
	var s []string
	for _, ip := range c.IPAddresses {
		s = append(s, ip.String())
	}
	return s
}
