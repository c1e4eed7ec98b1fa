package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/falconhq/falcon/internal/auth"
)

// LoginPath is the login endpoint `falcon auth login` opens in the browser.
// In production it sits behind Cloudflare Access like the rest of the
// server, so a browser only reaches it after logging in there, carrying
// the Access token this endpoint hands back to the CLI.
const LoginPath = "/auth/login"

// tokenVerifier is an authenticator that checks bearer tokens, which the
// login endpoint needs to vet the token before handing it out.
type tokenVerifier interface {
	Verify(ctx context.Context, token string) (auth.Principal, time.Time, error)
}

// loginHandler serves GET /auth/login?callback=http://127.0.0.1:PORT/callback&state=S,
// in four steps:
//
//  1. Check the callback: plain http to a loopback address only, so the
//     token can only ever go to a listener on the user's own machine.
//  2. Check the state: the CLI's random value, passed back untouched.
//  3. Verify the request's Access token exactly as an API call's.
//  4. Redirect to the callback with token and state, or with error and
//     state, so the CLI ends with the reason instead of waiting.
func (s *Server) loginHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet {
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		cb, err := loopbackCallback(q.Get("callback"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		state := q.Get("state")
		if err := checkState(state); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		back := func(v url.Values) {
			v.Set("state", state)
			cb.RawQuery = v.Encode()
			http.Redirect(w, r, cb.String(), http.StatusSeeOther)
		}
		v, ok := s.auth.(tokenVerifier)
		if !ok {
			back(url.Values{"error": {"this server does not check tokens (falcon dev): no login is needed"}})
			return
		}
		tok := auth.TokenFromRequest(r)
		if tok == "" {
			s.log.Warn("login refused", "from", r.RemoteAddr, "reason", "no token")
			back(url.Values{"error": {"the request reached Falcon without a Cloudflare Access token: is the server behind Cloudflare Access?"}})
			return
		}
		p, exp, err := v.Verify(r.Context(), tok)
		if err != nil {
			attrs := []any{"from", r.RemoteAddr, "reason", err.Error()}
			var re *auth.RefusedError
			if errors.As(err, &re) && re.Detail != nil {
				attrs = append(attrs, "detail", re.Detail.Error())
			}
			s.log.Warn("login refused", attrs...)
			back(url.Values{"error": {err.Error()}})
			return
		}
		s.log.Info("login", "user", p.Display(), "user_id", p.UserID, "expires", exp)
		back(url.Values{"token": {tok}})
	})
}

// loopbackCallback accepts http://127.0.0.1:PORT/..., http://[::1]:PORT/...
// or http://localhost:PORT/... and nothing else.
func loopbackCallback(raw string) (*url.URL, error) {
	bad := fmt.Errorf("callback must be http://127.0.0.1:PORT/...: the token is only handed to a listener on your own machine")
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || u.Port() == "" || u.Opaque != "" {
		return nil, bad
	}
	if host := u.Hostname(); host != "localhost" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return nil, bad
		}
	}
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

func checkState(s string) error {
	if len(s) < 16 || len(s) > 128 {
		return fmt.Errorf("state must be 16 to 128 characters")
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("state must be letters, digits, - and _")
		}
	}
	return nil
}
