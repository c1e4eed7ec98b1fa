package auth

import (
	"context"
	"os/user"
	"strings"
)

// Principal is an authenticated caller.
type Principal struct {
	UserID string // stable ID (Cloudflare Access sub; local:<username> in dev)
	Email  string
}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the caller, if authenticated.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// Authenticator decides who made a call from its metadata (gRPC metadata or
// HTTP headers forwarded by the gateway, keys lower-cased).
type Authenticator interface {
	Authenticate(ctx context.Context, md map[string][]string) (Principal, error)
}

// Local attributes every call to one fixed principal.
type Local struct{ P Principal }

var _ Authenticator = Local{}

// Authenticate returns the local principal.
func (l Local) Authenticate(context.Context, map[string][]string) (Principal, error) {
	return l.P, nil
}

// LocalUser returns a principal for the OS user running Falcon.
func LocalUser() Principal {
	name := "falcon"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = strings.ToLower(u.Username)
	}
	return Principal{UserID: "local:" + name, Email: name + "@localhost"}
}
