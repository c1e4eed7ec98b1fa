package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// DefaultClockSkew is how far the server's clock may be from Cloudflare's
// before exp, nbf and iat refuse a token.
const DefaultClockSkew = 30 * time.Second

// CertsPath is where a Cloudflare Access team publishes its signing keys.
const CertsPath = "/cdn-cgi/access/certs"

// CloudflareConfig says which tokens a server accepts.
type CloudflareConfig struct {
	// Issuer is the team domain as tokens name it in iss:
	// https://<team>.cloudflareaccess.com (see TeamIssuer).
	Issuer string
	// Audience is the Access application's AUD tag; a token's aud must
	// contain it.
	Audience string
	// CertsURL is the JWKS; empty means Issuer + CertsPath.
	CertsURL string
}

// TeamIssuer turns what an operator types (myteam,
// myteam.cloudflareaccess.com or https://myteam.cloudflareaccess.com) into
// the issuer URL tokens carry. Plain http is allowed for loopback hosts only,
// which is what tests serve their JWKS on.
func TeamIssuer(domain string) (string, error) {
	d := strings.TrimSuffix(strings.TrimSpace(domain), "/")
	if d == "" {
		return "", fmt.Errorf("team domain is empty")
	}
	if !strings.Contains(d, "://") {
		if !strings.Contains(d, ".") {
			d += ".cloudflareaccess.com"
		}
		d = "https://" + d
	}
	u, err := url.Parse(d)
	if err != nil || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return "", fmt.Errorf("team domain %q is not a host name like myteam.cloudflareaccess.com", domain)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if ip := net.ParseIP(u.Hostname()); (ip == nil || !ip.IsLoopback()) && u.Hostname() != "localhost" {
			return "", fmt.Errorf("team domain %q: tokens are only fetched and trusted over https", domain)
		}
	default:
		return "", fmt.Errorf("team domain %q: scheme must be https", domain)
	}
	return u.Scheme + "://" + u.Host, nil
}

// CloudflareAccess verifies Cloudflare Access tokens (RS256 JWTs) against
// the team's published keys. The keys are fetched once and cached; a token
// signed with a key the cache does not know makes it fetch them again, so
// Cloudflare can rotate keys without a restart; such fetches are at least
// WithKeyRefreshInterval apart, so forged kids cannot make the server fetch
// on every request.
//
// Checks, cheapest first, so that garbage never causes a key fetch:
// well-formed; alg RS256; iss is the team; aud has the application's tag;
// exp, nbf and iat hold within the clock skew; then the signature; then the
// token must name a person (sub and email) or a service token (common_name).
type CloudflareAccess struct {
	cfg      CloudflareConfig
	verifier *oidc.IDTokenVerifier
	now      func() time.Time
	skew     time.Duration
	hc       *http.Client // for CheckKeys: unthrottled, so a probe is never answered from a cache
}

var _ Authenticator = (*CloudflareAccess)(nil)

// CloudflareOption configures a CloudflareAccess.
type CloudflareOption func(*cfOptions)

type cfOptions struct {
	now     func() time.Time
	skew    time.Duration
	hc      *http.Client
	refresh time.Duration
}

// WithClock sets the clock tokens' times are checked against.
func WithClock(now func() time.Time) CloudflareOption { return func(o *cfOptions) { o.now = now } }

// WithClockSkew sets the tolerance of exp, nbf and iat (default DefaultClockSkew).
func WithClockSkew(d time.Duration) CloudflareOption { return func(o *cfOptions) { o.skew = d } }

// WithHTTPClient sets the client that fetches the keys (default: one with a
// 10s timeout, so a hanging key endpoint cannot hold every later refresh).
func WithHTTPClient(hc *http.Client) CloudflareOption { return func(o *cfOptions) { o.hc = hc } }

// WithKeyRefreshInterval sets the least time between two fetches of the
// keys (default DefaultKeyRefreshInterval), measured on the WithClock clock.
func WithKeyRefreshInterval(d time.Duration) CloudflareOption {
	return func(o *cfOptions) { o.refresh = d }
}

// NewCloudflareAccess returns a verifier for cfg. No request is made until
// the first token arrives. ctx carries configuration only; cancelling it
// does not stop later key fetches.
func NewCloudflareAccess(ctx context.Context, cfg CloudflareConfig, opts ...CloudflareOption) (*CloudflareAccess, error) {
	o := cfOptions{now: time.Now, skew: DefaultClockSkew, hc: &http.Client{Timeout: 10 * time.Second}, refresh: DefaultKeyRefreshInterval}
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.Issuer == "" {
		return nil, fmt.Errorf("cloudflare access: the team domain (issuer) is required")
	}
	if cfg.Audience == "" {
		return nil, fmt.Errorf("cloudflare access: the application audience (AUD tag) is required")
	}
	cfg.Issuer = strings.TrimSuffix(cfg.Issuer, "/")
	if cfg.CertsURL == "" {
		cfg.CertsURL = cfg.Issuer + CertsPath
	}
	hc := *o.hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &throttledKeys{base: base, interval: o.refresh, now: o.now}
	keys := oidc.NewRemoteKeySet(oidc.ClientContext(ctx, &hc), cfg.CertsURL)
	v := oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{
		ClientID:             cfg.Audience,
		SupportedSigningAlgs: []string{oidc.RS256},
		// Times are checked below, with a skew that go-oidc does not offer
		// for exp and iat.
		SkipExpiryCheck: true,
		Now:             o.now,
	})
	return &CloudflareAccess{cfg: cfg, verifier: v, now: o.now, skew: o.skew, hc: o.hc}, nil
}

// CheckKeys fetches the team's signing keys once and says how many it
// publishes. The server calls it at start and until it succeeds: tokens
// are verified against these keys, so without them every call is refused,
// and the operator needs to hear why before users do.
func (c *CloudflareAccess) CheckKeys(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.CertsURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("fetch the signing keys of %s: %w", c.cfg.Issuer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("fetch the signing keys of %s: %s answered %s", c.cfg.Issuer, c.cfg.CertsURL, resp.Status)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return 0, fmt.Errorf("fetch the signing keys of %s: %s is not a JSON Web Key Set: %w", c.cfg.Issuer, c.cfg.CertsURL, err)
	}
	if len(set.Keys) == 0 {
		return 0, fmt.Errorf("fetch the signing keys of %s: %s publishes no keys", c.cfg.Issuer, c.cfg.CertsURL)
	}
	return len(set.Keys), nil
}

// CertsURL is where the team's signing keys are fetched from.
func (c *CloudflareAccess) CertsURL() string { return c.cfg.CertsURL }

// Authenticate verifies the token a call carries (see TokenFromMetadata).
func (c *CloudflareAccess) Authenticate(ctx context.Context, md map[string][]string) (Principal, error) {
	tok := TokenFromMetadata(md)
	if tok == "" {
		return Principal{}, refuse("no credentials: send a Cloudflare Access token (run `falcon auth login`)", nil)
	}
	p, _, err := c.Verify(ctx, tok)
	return p, err
}

// Verify checks a token and returns who it names and when it expires.
func (c *CloudflareAccess) Verify(ctx context.Context, token string) (Principal, time.Time, error) {
	h, cl, err := Peek(token)
	if err != nil {
		return Principal{}, time.Time{}, refuse("malformed token", err)
	}
	if h.Alg != oidc.RS256 {
		return Principal{}, time.Time{}, refuse(fmt.Sprintf("token signed with %q; only RS256 is accepted", h.Alg), nil)
	}
	if cl.Issuer != c.cfg.Issuer {
		return Principal{}, time.Time{}, refuse("token issued by another team domain (iss)", fmt.Errorf("iss %q, want %q", cl.Issuer, c.cfg.Issuer))
	}
	if !slices.Contains(cl.Audience, c.cfg.Audience) {
		return Principal{}, time.Time{}, refuse("token is for another application (aud)", fmt.Errorf("aud %q", cl.Audience))
	}
	now := c.now()
	switch {
	case cl.Expiry.IsZero():
		return Principal{}, time.Time{}, refuse("token has no expiry (exp)", nil)
	case now.After(cl.Expiry.Add(c.skew)):
		return Principal{}, time.Time{}, refuse(fmt.Sprintf("token expired at %s", cl.Expiry.UTC().Format(time.RFC3339)), nil)
	case !cl.NotBefore.IsZero() && now.Add(c.skew).Before(cl.NotBefore):
		return Principal{}, time.Time{}, refuse(fmt.Sprintf("token not valid before %s", cl.NotBefore.UTC().Format(time.RFC3339)), nil)
	case !cl.IssuedAt.IsZero() && now.Add(c.skew).Before(cl.IssuedAt):
		return Principal{}, time.Time{}, refuse("token issued in the future (iat)", fmt.Errorf("iat %s, now %s", cl.IssuedAt, now))
	}
	if _, err := c.verifier.Verify(ctx, token); err != nil {
		return Principal{}, time.Time{}, refuse("token signature not verified", fmt.Errorf("kid %q: %w", h.Kid, err))
	}
	p, err := principalOf(cl)
	return p, cl.Expiry, err
}

// principalOf names the caller of a verified token: a person has sub and
// email; a service token has common_name (its client ID) and no email.
func principalOf(c Claims) (Principal, error) {
	switch {
	case c.Email != "" && c.Subject != "":
		return Principal{UserID: c.Subject, Email: strings.ToLower(c.Email), Kind: KindUser, Groups: c.Groups}, nil
	case c.Email != "":
		return Principal{}, refuse("token has an email but no subject (sub)", nil)
	case c.CommonName != "":
		id := c.Subject
		if id == "" {
			id = "service:" + c.CommonName
		}
		return Principal{UserID: id, Name: c.CommonName, Kind: KindService}, nil
	}
	return Principal{}, refuse("token names neither a user (email) nor a service token (common_name)", nil)
}
