package auth

import (
	"context"
	"os/user"
	"strings"
)

// Kind says what sort of caller a Principal is.
type Kind string

// The kinds of callers.
const (
	// KindUser is a person (a Cloudflare Access user, or the local user of
	// `falcon dev`).
	KindUser Kind = "user"
	// KindService is a Cloudflare Access service token: CI jobs and agents.
	// It may do what a user may do; it has no email.
	KindService Kind = "service"
	// KindController is one of Falcon's own controllers, the only callers
	// of the internal methods (status updates, AbortJob, WatchChanges).
	KindController Kind = "controller"
)

// Principal is an authenticated caller.
type Principal struct {
	UserID string // stable ID (Cloudflare Access sub; service:<common_name>; local:<username> in dev)
	Email  string // empty for service principals and controllers
	// Name is how to show a principal that has no email: a service
	// token's common_name.
	Name string
	Kind Kind
	// Groups are the identity provider's groups the token carried, if any.
	Groups []string
}

// Display is how the principal is named to people: its email, or else its
// name, or else its ID.
func (p Principal) Display() string {
	switch {
	case p.Email != "":
		return p.Email
	case p.Name != "":
		return p.Name
	}
	return p.UserID
}

// IsController reports whether p is one of Falcon's controllers.
func (p Principal) IsController() bool { return p.Kind == KindController }

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
// HTTP headers forwarded by the gateway, keys lower-cased). A refusal is an
// error that unwraps to errdefs.ErrUnauthenticated, usually a *RefusedError.
type Authenticator interface {
	Authenticate(ctx context.Context, md map[string][]string) (Principal, error)
}

// Local attributes every call to one fixed principal. It checks nothing, so
// it is only for servers that listen on loopback (`falcon dev`). The API
// server treats that principal as its admin: it is the only user there is.
type Local struct{ P Principal }

var _ Authenticator = Local{}

// Authenticate returns the local principal.
func (l Local) Authenticate(context.Context, map[string][]string) (Principal, error) {
	p := l.P
	if p.Kind == "" {
		p.Kind = KindUser
	}
	return p, nil
}

// LocalUser returns a principal for the OS user running Falcon.
func LocalUser() Principal {
	name := "falcon"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = strings.ToLower(u.Username)
	}
	return Principal{UserID: "local:" + name, Email: name + "@localhost", Kind: KindUser}
}
