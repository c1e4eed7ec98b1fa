package authtest

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

// Refused is a token a verifier must refuse, and a part of the reason it
// must give.
type Refused struct {
	Name   string
	Token  string
	Reason string
}

// RefusedTokens returns the tokens every verifier of i's tokens must
// refuse: each differs from a valid token in one way.
func RefusedTokens(tb testing.TB, i *Issuer) []Refused {
	tb.Helper()
	now := i.Now()
	good := i.Key()
	with := func(k string, v any) map[string]any {
		c := i.UserClaims("mallory@example.com")
		c[k] = v
		return c
	}
	without := func(keys ...string) map[string]any {
		c := i.UserClaims("mallory@example.com")
		for _, k := range keys {
			delete(c, k)
		}
		return c
	}
	stranger := NewKey(tb, good.ID) // same kid, other key: a forged signature
	unknown := NewKey(tb, "key-nobody-published")
	pubDER, err := x509.MarshalPKIXPublicKey(&good.Private.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hs256 := func(secret []byte) func([]byte) []byte {
		return func(in []byte) []byte {
			m := hmac.New(sha256.New, secret)
			m.Write(in)
			return m.Sum(nil)
		}
	}
	valid := i.UserClaims("mallory@example.com")
	return []Refused{
		{"expired", Sign(good, with("exp", now.Add(-time.Hour).Unix())), "expired"},
		{"not yet valid", Sign(good, with("nbf", now.Add(time.Hour).Unix())), "not valid before"},
		{"issued in the future", Sign(good, with("iat", now.Add(time.Hour).Unix())), "issued in the future"},
		{"no expiry", Sign(good, without("exp")), "no expiry"},
		{"wrong audience", Sign(good, with("aud", []string{"another-app"})), "another application"},
		{"wrong issuer", Sign(good, with("iss", "https://evil.cloudflareaccess.com")), "another team"},
		{"bad signature", Sign(stranger, valid), "signature"},
		{"unknown kid", Sign(unknown, valid), "signature"},
		{"alg none", SignWith(map[string]any{"alg": "none", "typ": "JWT"}, valid, func([]byte) []byte { return nil }), `"none"`},
		{"HS256 signed with the public key", SignWith(map[string]any{"alg": "HS256", "kid": good.ID, "typ": "JWT"}, valid, hs256(pubPEM)), `"HS256"`},
		{"HS256 signed with the public key DER", SignWith(map[string]any{"alg": "HS256", "kid": good.ID}, valid, hs256(pubDER)), `"HS256"`},
		{"missing email and common_name", Sign(good, without("email")), "neither a user"},
		{"email without sub", Sign(good, without("sub")), "no subject"},
		{"malformed: not a JWT", "not-a-jwt", "malformed"},
		{"malformed: garbage segments", "a.b.c", "malformed"},
		{"malformed: four parts", Sign(good, valid) + ".x", "malformed"},
		{"tampered claims", tamper(Sign(good, valid), i.UserClaims("admin@example.com")), "signature"},
	}
}

// tamper replaces the claims of a signed token, keeping its signature.
func tamper(token string, claims map[string]any) string {
	forged := strings.Split(SignWith(map[string]any{}, claims, func([]byte) []byte { return nil }), ".")
	parts := strings.Split(token, ".")
	return parts[0] + "." + forged[1] + "." + parts[2]
}
