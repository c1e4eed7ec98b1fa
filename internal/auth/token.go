package auth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// Where a Cloudflare Access token travels.
const (
	// AssertionHeader is set by Cloudflare's edge on every request it lets
	// through to the origin.
	AssertionHeader = "Cf-Access-Jwt-Assertion"
	// AuthCookie is the browser's Access session for the application.
	AuthCookie = "CF_Authorization"
	// AccessTokenHeader is how a client that holds a token (the CLI) shows
	// it to Cloudflare's edge, which checks it before forwarding.
	AccessTokenHeader = "Cf-Access-Token"
)

// Metadata keys, lower-cased as gRPC and the gateway deliver them. The
// gateway forwards Authorization as is, Cookie prefixed (grpcgateway-cookie),
// and the assertion header under its own name (see apiserver.Gateway).
const (
	mdAssertion     = "cf-access-jwt-assertion"
	mdAuthorization = "authorization"
	mdCookie        = "cookie"
	mdGatewayCookie = "grpcgateway-cookie"
)

// TokenFromMetadata finds the caller's token: the header Cloudflare's edge
// sets wins, then Authorization: Bearer (the CLI, agents), then the
// CF_Authorization cookie (browsers). It returns "" when there is none.
func TokenFromMetadata(md map[string][]string) string {
	if t := first(md[mdAssertion]); t != "" {
		return t
	}
	for _, v := range md[mdAuthorization] {
		if t := bearer(v); t != "" {
			return t
		}
	}
	for _, k := range []string{mdCookie, mdGatewayCookie} {
		for _, v := range md[k] {
			if t := cookieToken(v); t != "" {
				return t
			}
		}
	}
	return ""
}

// TokenFromRequest is TokenFromMetadata for a plain HTTP request.
func TokenFromRequest(r *http.Request) string {
	return TokenFromMetadata(map[string][]string{
		mdAssertion:     r.Header.Values(AssertionHeader),
		mdAuthorization: r.Header.Values("Authorization"),
		mdCookie:        r.Header.Values("Cookie"),
	})
}

func first(vs []string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

func bearer(v string) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// cookieToken reads the Access cookie leniently, as net/http does for
// requests: a browser also sends other sites' cookies on the same domain,
// and one malformed neighbour must not hide the token.
func cookieToken(header string) string {
	r := http.Request{Header: http.Header{"Cookie": {header}}}
	c, err := r.Cookie(AuthCookie)
	if err != nil {
		return ""
	}
	return c.Value
}

// Claims are the parts of a Cloudflare Access token Falcon reads.
type Claims struct {
	Issuer     string
	Subject    string
	Audience   []string
	Email      string
	CommonName string // set on service tokens, which have no email
	Type       string // "app" for an application token
	// Groups are the identity provider's groups, when Access passes them:
	// a top-level "groups" claim, or "groups" inside Access's "custom"
	// claims (OIDC claims forwarded from the IdP).
	Groups    []string
	Expiry    time.Time
	NotBefore time.Time // zero when absent
	IssuedAt  time.Time // zero when absent
}

// Header is the JOSE header of a token.
type Header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// ErrMalformed is a token that is not a JWT at all.
var ErrMalformed = errors.New("malformed token")

// Peek decodes a token's header and claims WITHOUT verifying anything. It
// serves the CLI (to show who is logged in and until when) and the cheap
// checks before a signature is verified; never trust its result alone.
func Peek(token string) (Header, Claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Header{}, Claims{}, fmt.Errorf("%w: want three dot-separated parts, got %d", ErrMalformed, len(parts))
	}
	var h Header
	if err := decodeSegment(parts[0], &h); err != nil {
		return Header{}, Claims{}, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	var raw struct {
		Iss        string          `json:"iss"`
		Sub        string          `json:"sub"`
		Aud        json.RawMessage `json:"aud"`
		Email      string          `json:"email"`
		CommonName string          `json:"common_name"`
		Type       string          `json:"type"`
		Exp        *float64        `json:"exp"`
		Nbf        *float64        `json:"nbf"`
		Iat        *float64        `json:"iat"`
		Groups     []string        `json:"groups"`
		Custom     struct {
			Groups []string `json:"groups"`
		} `json:"custom"`
	}
	if err := decodeSegment(parts[1], &raw); err != nil {
		return Header{}, Claims{}, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	c := Claims{Issuer: raw.Iss, Subject: raw.Sub, Email: raw.Email, CommonName: raw.CommonName, Type: raw.Type,
		Expiry: unix(raw.Exp), NotBefore: unix(raw.Nbf), IssuedAt: unix(raw.Iat),
		Groups: append(raw.Groups, raw.Custom.Groups...)}
	// aud is a string or an array of strings (RFC 7519 4.1.3).
	if len(raw.Aud) > 0 && string(raw.Aud) != "null" {
		var one string
		if err := json.Unmarshal(raw.Aud, &one); err == nil {
			c.Audience = []string{one}
		} else if err := json.Unmarshal(raw.Aud, &c.Audience); err != nil {
			return Header{}, Claims{}, fmt.Errorf("%w: aud is neither a string nor a list of strings", ErrMalformed)
		}
	}
	return h, c, nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(seg, "="))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func unix(v *float64) time.Time {
	if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return time.Time{}
	}
	sec, frac := math.Modf(*v)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}
