package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
)

// knownUserTTL is how long a server admits a registered user without
// reading the users table again. A relink makes the server that ran it
// forget the old user_id at once; other replicas go on admitting it for
// up to this long, and never refuse the new one, which they do not know.
const knownUserTTL = time.Minute

// register registers p on its first call (and checks again once
// knownUserTTL has passed). A person whose Cloudflare identity was
// recreated comes back with their email and a new sub, which the email's
// row does not have: they are refused with the command that lets an admin
// move them to it.
func (s *Server) register(ctx context.Context, p auth.Principal) error {
	now := s.now()
	if at, ok := s.knownUsers.Load(p.UserID); ok && now.Sub(at.(time.Time)) < knownUserTTL {
		return nil
	}
	if _, err := s.store.EnsureUser(ctx, &store.User{UserID: p.UserID, Email: p.Email}); err != nil {
		if errors.Is(err, errdefs.ErrAlreadyExists) {
			fix := relinkCommand(p.Email, p.UserID)
			s.log.Error("user's email is registered to another user_id", "user_id", p.UserID, "email", p.Email, "fix", fix)
			return fmt.Errorf("%w: %s is registered to another identity; this one (user_id %s) is new. "+
				"If Cloudflare Access gave them a new identity, an administrator can move them to it: %s",
				errdefs.ErrPermissionDenied, p.Email, p.UserID, fix)
		}
		return err
	}
	s.knownUsers.Store(p.UserID, now)
	return nil
}

// relinkCommand is the command line that links email to sub, quoted for a
// shell when either needs it.
func relinkCommand(email, sub string) string {
	return "falcon user relink " + shellWord(email) + " --sub " + shellWord(sub)
}

func shellWord(s string) string {
	plain := s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("@._+-:=/", r)))
	})
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// GetCurrentUser returns the caller's user record.
func (s *Server) GetCurrentUser(ctx context.Context, _ *falconv1.GetCurrentUserRequest) (*falconv1.User, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	u, err := s.store.EnsureUser(ctx, &store.User{UserID: p.UserID, Email: p.Email})
	if err != nil {
		return nil, err
	}
	out := userToAPI(u)
	out.Admin = s.isAdmin(p)
	return out, nil
}

// ListUsers lists registered users, saying which are admins by email. The
// access rules keep it to admins.
func (s *Server) ListUsers(ctx context.Context, _ *falconv1.ListUsersRequest) (*falconv1.ListUsersResponse, error) {
	us, err := s.store.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	resp := &falconv1.ListUsersResponse{Items: make([]*falconv1.User, 0, len(us)), AdminsByGroup: s.admins.HasGroups()}
	for _, u := range us {
		out := userToAPI(u)
		// A user without an email is a service principal, never an admin.
		out.Admin = u.Email != "" && s.isAdmin(auth.Principal{UserID: u.UserID, Email: u.Email, Kind: auth.KindUser})
		resp.Items = append(resp.Items, out)
	}
	return resp, nil
}

// maxSubBytes is the width of users.user_id.
const maxSubBytes = 255

// RelinkUser moves the user registered with an email to a new Cloudflare
// identity (sub), with their experiments. The access rules keep it to
// admins and audit it.
func (s *Server) RelinkUser(ctx context.Context, req *falconv1.RelinkUserRequest) (*falconv1.RelinkUserResponse, error) {
	email := strings.ToLower(strings.TrimSpace(req.GetEmail()))
	sub := strings.TrimSpace(req.GetSub())
	var errs errdefs.FieldErrors
	if email == "" {
		errs.Add("email", "is required: the email the user is registered with")
	}
	switch {
	case sub == "":
		errs.Add("sub", "is required: the new identity's Cloudflare Access subject, which the refusal of its calls names")
	case len(sub) > maxSubBytes:
		errs.Add("sub", "is %d bytes long; a user_id has at most %d", len(sub), maxSubBytes)
	case strings.ContainsFunc(sub, unicode.IsSpace):
		errs.Add("sub", "%q contains spaces; a Cloudflare Access subject has none", sub)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	r, err := s.store.RelinkUser(ctx, email, sub)
	var taken *store.UserIDTakenError
	if errors.As(err, &taken) {
		holder := taken.Holder
		if holder == "" {
			holder = "another user"
		}
		return nil, errdefs.AlreadyExists("sub: %q is already the identity of %s; one identity is one user, so %s was not moved", sub, holder, email)
	}
	if err != nil {
		return nil, err
	}
	if r.Changed() {
		s.knownUsers.Delete(r.PreviousID)
		noteAudit(ctx, "", fmt.Sprintf("user_id %s -> %s; %d experiments moved", r.PreviousID, r.User.UserID, r.Experiments))
		s.log.Info("user relinked", "email", email, "from", r.PreviousID, "to", r.User.UserID, "experiments", r.Experiments)
	} else {
		noteAudit(ctx, "", "already linked to "+sub+"; nothing changed")
	}
	return &falconv1.RelinkUserResponse{
		User: userToAPI(r.User), PreviousUserId: r.PreviousID, Experiments: r.Experiments, Changed: r.Changed(),
	}, nil
}
