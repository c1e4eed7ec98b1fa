// Package authtest stands in for Cloudflare Access in tests: RSA keys made
// in the test, a JWKS served over loopback HTTP at the path Cloudflare
// uses, and tokens minted with any claims, header or signature, including
// the broken ones a verifier must refuse.
package authtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/auth"
)

// Audience is the application AUD tag test issuers expect.
const Audience = "falcon-test-aud-0123456789abcdef"

// Key is an RSA signing key and its kid.
type Key struct {
	ID      string
	Private *rsa.PrivateKey
}

// NewKey generates a 2048-bit RSA key.
func NewKey(tb testing.TB, id string) *Key {
	tb.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	return &Key{ID: id, Private: k}
}

// Issuer is a Cloudflare Access team: its URL is the iss of its tokens and
// it serves its public keys at URL + auth.CertsPath.
type Issuer struct {
	URL string
	// Now is the clock tokens' iat and exp are minted from (default time.Now).
	Now func() time.Time

	mu      sync.Mutex
	served  []*Key
	fetches atomic.Int64
}

// NewIssuer serves a JWKS holding one fresh key until the test ends.
func NewIssuer(tb testing.TB) *Issuer {
	tb.Helper()
	i := &Issuer{Now: time.Now, served: []*Key{NewKey(tb, "key-1")}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+auth.CertsPath, func(w http.ResponseWriter, _ *http.Request) {
		i.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(i.jwks())
	})
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	i.URL = srv.URL
	return i
}

// Config is the verifier configuration that accepts this issuer's tokens.
func (i *Issuer) Config() auth.CloudflareConfig {
	return auth.CloudflareConfig{Issuer: i.URL, Audience: Audience}
}

// Key returns the first served key.
func (i *Issuer) Key() *Key {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.served[0]
}

// Serve replaces the published keys, as Cloudflare does when it rotates.
func (i *Issuer) Serve(keys ...*Key) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.served = keys
}

// Fetches counts how often the JWKS was requested.
func (i *Issuer) Fetches() int64 { return i.fetches.Load() }

func (i *Issuer) jwks() map[string]any {
	i.mu.Lock()
	defer i.mu.Unlock()
	var keys []map[string]any
	for _, k := range i.served {
		pub := k.Private.PublicKey
		keys = append(keys, map[string]any{
			"kty": "RSA", "alg": "RS256", "use": "sig", "kid": k.ID,
			"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
		})
	}
	return map[string]any{"keys": keys}
}

// UserClaims are the claims of a valid application token for email, as
// Cloudflare issues them, valid for an hour from the issuer's clock.
func (i *Issuer) UserClaims(email string) map[string]any {
	now := i.Now()
	return map[string]any{
		"aud": []string{Audience}, "email": email, "sub": "sub-" + email,
		"iss": i.URL, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"type": "app", "identity_nonce": "n", "country": "US",
	}
}

// ServiceClaims are the claims of a service token's application token:
// common_name (the client ID) instead of email, and an empty sub.
func (i *Issuer) ServiceClaims(commonName string) map[string]any {
	c := i.UserClaims("")
	delete(c, "email")
	c["sub"] = ""
	c["common_name"] = commonName
	return c
}

// Token returns a valid token for email signed with the first served key.
func (i *Issuer) Token(email string) string {
	return Sign(i.Key(), i.UserClaims(email))
}

// Sign returns an RS256 token with key's kid.
func Sign(k *Key, claims map[string]any) string {
	return SignWith(map[string]any{"alg": "RS256", "kid": k.ID, "typ": "JWT"}, claims, func(in []byte) []byte {
		sum := sha256.Sum256(in)
		sig, err := rsa.SignPKCS1v15(rand.Reader, k.Private, crypto.SHA256, sum[:])
		if err != nil {
			panic(err)
		}
		return sig
	})
}

// SignWith assembles a token from any header and claims; sign receives the
// signing input and returns the signature (nil for none).
func SignWith(header, claims map[string]any, sign func(signingInput []byte) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	in := b64(h) + "." + b64(c)
	return in + "." + b64(sign([]byte(in)))
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
