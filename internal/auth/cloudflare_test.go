package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/errdefs"
)

var ctx = context.Background()

func newVerifier(t *testing.T, iss *authtest.Issuer, opts ...auth.CloudflareOption) *auth.CloudflareAccess {
	t.Helper()
	v, err := auth.NewCloudflareAccess(ctx, iss.Config(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerifyRefuses(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := newVerifier(t, iss)
	for _, tc := range authtest.RefusedTokens(t, iss) {
		t.Run(tc.Name, func(t *testing.T) {
			p, _, err := v.Verify(ctx, tc.Token)
			if err == nil {
				t.Fatalf("Verify accepted the token as %+v", p)
			}
			var re *auth.RefusedError
			if !errors.As(err, &re) || !errors.Is(err, errdefs.ErrUnauthenticated) {
				t.Fatalf("Verify error %v (%T) is not a RefusedError that is ErrUnauthenticated", err, err)
			}
			if !strings.Contains(re.Reason, tc.Reason) {
				t.Errorf("reason %q does not contain %q", re.Reason, tc.Reason)
			}
			if strings.Contains(err.Error(), tc.Token) || (re.Detail != nil && strings.Contains(re.Detail.Error(), tc.Token)) {
				t.Error("the refusal quotes the token")
			}
		})
	}
}

func TestVerifyAccepts(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := newVerifier(t, iss)
	tests := []struct {
		name   string
		claims map[string]any
		want   auth.Principal
	}{
		{"user", iss.UserClaims("Alice@Example.com"), auth.Principal{UserID: "sub-Alice@Example.com", Email: "alice@example.com", Kind: auth.KindUser}},
		{"service token", iss.ServiceClaims("ci-bot.access"), auth.Principal{UserID: "service:ci-bot.access", Name: "ci-bot.access", Kind: auth.KindService}},
		{"aud as a string", func() map[string]any {
			c := iss.UserClaims("bob@example.com")
			c["aud"] = authtest.Audience
			return c
		}(), auth.Principal{UserID: "sub-bob@example.com", Email: "bob@example.com", Kind: auth.KindUser}},
		{"expired within the clock skew", func() map[string]any {
			c := iss.UserClaims("carol@example.com")
			c["exp"] = time.Now().Add(-10 * time.Second).Unix()
			return c
		}(), auth.Principal{UserID: "sub-carol@example.com", Email: "carol@example.com", Kind: auth.KindUser}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, exp, err := v.Verify(ctx, authtest.Sign(iss.Key(), tt.claims))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, p); diff != "" {
				t.Errorf("principal (-want +got):\n%s", diff)
			}
			if want := time.Unix(tt.claims["exp"].(int64), 0).UTC(); !exp.Equal(want) {
				t.Errorf("expiry %v, want %v", exp, want)
			}
		})
	}
}

func TestClockSkewUsesInjectedClock(t *testing.T) {
	iss := authtest.NewIssuer(t)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	iss.Now = func() time.Time { return now }
	v := newVerifier(t, iss, auth.WithClock(func() time.Time { return now.Add(time.Hour + time.Minute) }))
	_, _, err := v.Verify(ctx, iss.Token("a@example.com"))
	if err == nil || !strings.Contains(err.Error(), "expired at 2030-01-01T01:00:00Z") {
		t.Fatalf("Verify an hour and a minute after issue = %v, want expired", err)
	}
}

// Cloudflare rotates its keys: the new key is published, then tokens are
// signed with it. The verifier fetches the keys again when it meets a kid
// it does not know; a key no longer published stops working once the set
// is fetched again.
func TestKeyRotationWithoutRestart(t *testing.T) {
	iss := authtest.NewIssuer(t)
	clock := newClock()
	v := newVerifier(t, iss, auth.WithClock(clock.Now))
	old := iss.Key()
	if _, _, err := v.Verify(ctx, iss.Token("a@example.com")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Verify(ctx, iss.Token("a@example.com")); err != nil {
		t.Fatal(err)
	}
	if n := iss.Fetches(); n != 1 {
		t.Fatalf("JWKS fetched %d times for two tokens of one key; want once (cached)", n)
	}

	// Cloudflare rotates some time after the last fetch.
	clock.Advance(auth.DefaultKeyRefreshInterval)
	rotated := authtest.NewKey(t, "key-2")
	iss.Serve(rotated)
	if _, _, err := v.Verify(ctx, authtest.Sign(rotated, iss.UserClaims("a@example.com"))); err != nil {
		t.Fatalf("token signed with the rotated key: %v", err)
	}
	if n := iss.Fetches(); n != 2 {
		t.Fatalf("JWKS fetched %d times; want a second fetch for the new kid", n)
	}
	// go-oidc hands the fetched keys to the waiting call a moment before it
	// replaces its cache, so the retired key is refused once that is done.
	retired := authtest.Sign(old, iss.UserClaims("a@example.com"))
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, _, err := v.Verify(ctx, retired); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a token signed with the retired key still verifies 2s after the rotation was fetched")
		}
	}
}

// Forged tokens with ever new kids cost at most one key fetch per refresh
// interval, and a rotation is still seen once the interval has passed.
func TestUnknownKidsAreThrottled(t *testing.T) {
	iss := authtest.NewIssuer(t)
	clock := newClock()
	v := newVerifier(t, iss, auth.WithClock(clock.Now))
	if _, _, err := v.Verify(ctx, iss.Token("a@example.com")); err != nil {
		t.Fatal(err)
	}
	stranger := authtest.NewKey(t, "forged")
	for i := range 50 {
		forged := &authtest.Key{ID: fmt.Sprintf("forged-%d", i), Private: stranger.Private} // a new kid each time
		if _, _, err := v.Verify(ctx, authtest.Sign(forged, iss.UserClaims("a@example.com"))); !errors.Is(err, errdefs.ErrUnauthenticated) {
			t.Fatalf("forged token %d: %v, want Unauthenticated", i, err)
		}
		clock.Advance(time.Millisecond)
	}
	if n := iss.Fetches(); n != 1 {
		t.Fatalf("50 forged kids within the interval caused %d fetches; want only the first token's", n)
	}
	// The real key still verifies from the cache meanwhile.
	if _, _, err := v.Verify(ctx, iss.Token("a@example.com")); err != nil {
		t.Fatal(err)
	}

	rotated := authtest.NewKey(t, "key-2")
	iss.Serve(rotated)
	tok := authtest.Sign(rotated, iss.UserClaims("a@example.com"))
	if _, _, err := v.Verify(ctx, tok); err == nil {
		t.Fatal("a new kid verified without a fetch inside the interval")
	}
	clock.Advance(auth.DefaultKeyRefreshInterval)
	if _, _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("rotated key after the interval: %v", err)
	}
	if n := iss.Fetches(); n != 2 {
		t.Fatalf("JWKS fetched %d times; want 2", n)
	}
}

// A key endpoint that fails is not asked again within the interval.
func TestFailedKeyFetchIsNotRetriedAtOnce(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	iss := authtest.NewIssuer(t)
	cfg := iss.Config()
	cfg.CertsURL = srv.URL + auth.CertsPath
	clock := newClock()
	v, err := auth.NewCloudflareAccess(ctx, cfg, auth.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, _, err := v.Verify(ctx, iss.Token("a@example.com")); err == nil {
			t.Fatal("verified without keys")
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("a failing endpoint was asked %d times within the interval; want 1", n)
	}
	clock.Advance(auth.DefaultKeyRefreshInterval)
	_, _, _ = v.Verify(ctx, iss.Token("a@example.com"))
	if n := hits.Load(); n != 2 {
		t.Fatalf("endpoint asked %d times after the interval; want 2", n)
	}
}

// clock is a settable clock for the verifier, starting now so that the
// issuer's real-time tokens are valid.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestConcurrentFirstTokensShareOneFetch(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := newVerifier(t, iss)
	tok := iss.Token("a@example.com")
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { _, _, errs[i] = v.Verify(ctx, tok) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := iss.Fetches(); n > 2 {
		t.Errorf("JWKS fetched %d times for 16 concurrent first requests", n)
	}
}

func TestGarbageNeverFetchesKeys(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := newVerifier(t, iss)
	for _, tc := range authtest.RefusedTokens(t, iss) {
		switch tc.Name {
		case "bad signature", "unknown kid", "tampered claims", "missing email and common_name", "email without sub":
			continue // well-formed for the team and the application: only keys can tell
		}
		_, _, _ = v.Verify(ctx, tc.Token)
	}
	if n := iss.Fetches(); n != 0 {
		t.Errorf("tokens refused on their claims caused %d key fetches", n)
	}
}

func TestAuthenticateFindsTheToken(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := newVerifier(t, iss)
	tok := iss.Token("a@example.com")
	tests := []struct {
		name string
		md   map[string][]string
	}{
		{"assertion header", map[string][]string{"cf-access-jwt-assertion": {tok}}},
		{"bearer", map[string][]string{"authorization": {"Bearer " + tok}}},
		{"bearer, any case", map[string][]string{"authorization": {"bearer " + tok}}},
		{"cookie", map[string][]string{"cookie": {"a=b; CF_Authorization=" + tok + "; c=d"}}},
		{"cookie via the gateway", map[string][]string{"grpcgateway-cookie": {"CF_Authorization=" + tok}}},
		{"cookie beside a malformed one", map[string][]string{"cookie": {`bad="a b"; x=1; CF_Authorization=` + tok}}},
		{"assertion wins over a stale bearer", map[string][]string{"cf-access-jwt-assertion": {tok}, "authorization": {"Bearer stale"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := v.Authenticate(ctx, tt.md)
			if err != nil || p.Email != "a@example.com" {
				t.Fatalf("Authenticate = %+v, %v", p, err)
			}
		})
	}
	_, err := v.Authenticate(ctx, map[string][]string{"authorization": {"Basic dXNlcjpwYXNz"}})
	if !errors.Is(err, errdefs.ErrUnauthenticated) || !strings.Contains(err.Error(), "no credentials") {
		t.Errorf("Authenticate(basic auth) = %v, want no credentials", err)
	}
}

func TestTeamIssuer(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{in: "myteam", want: "https://myteam.cloudflareaccess.com"},
		{in: "myteam.cloudflareaccess.com", want: "https://myteam.cloudflareaccess.com"},
		{in: "https://myteam.cloudflareaccess.com/", want: "https://myteam.cloudflareaccess.com"},
		{in: "http://127.0.0.1:8443", want: "http://127.0.0.1:8443"},
		{in: "http://myteam.cloudflareaccess.com", err: "https"},
		{in: "https://myteam.cloudflareaccess.com/path", err: "not a host name"},
		{in: "", err: "empty"},
	}
	for _, tt := range tests {
		got, err := auth.TeamIssuer(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("TeamIssuer(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("TeamIssuer(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestNewCloudflareAccessNeedsConfig(t *testing.T) {
	if _, err := auth.NewCloudflareAccess(ctx, auth.CloudflareConfig{Issuer: "https://x.cloudflareaccess.com"}); err == nil {
		t.Error("accepted a config without audience")
	}
	if _, err := auth.NewCloudflareAccess(ctx, auth.CloudflareConfig{Audience: "a"}); err == nil {
		t.Error("accepted a config without issuer")
	}
}
