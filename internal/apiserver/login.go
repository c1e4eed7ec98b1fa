package apiserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/falconhq/falcon/internal/auth"
)

// LoginPath is the login endpoint `falcon auth login` opens in the browser.
// In production it sits behind Cloudflare Access like the rest of the
// server, so a browser only reaches it after logging in there, carrying
// the Access token this endpoint hands back to the CLI.
const LoginPath = "/auth/login"

// LoginConfirmTTL is how long a confirmation page stays good: the user
// has this long to press Continue.
const LoginConfirmTTL = 5 * time.Minute

// tokenVerifier is an authenticator that checks bearer tokens, which the
// login endpoint needs to vet the token before handing it out.
type tokenVerifier interface {
	Verify(ctx context.Context, token string) (auth.Principal, time.Time, error)
}

// loginHandler serves the login in two requests. A browser already logged
// in to Access would follow any login link without a question, so a
// redirect straight to the callback would hand the token to whichever
// loopback port the link names: on a shared machine, another user's. The
// user therefore confirms first, on a page showing the code the CLI
// printed in their terminal.
//
// GET /auth/login?callback=http://127.0.0.1:PORT/callback&state=S&code=C
// and the POST of its form take the same steps:
//
//  1. Check the callback: plain http to a loopback address only, so the
//     token can only ever go to a listener on the user's own machine.
//  2. Check the state (the CLI's random value, passed back untouched) and
//     the code (the CLI's short human one, only shown).
//  3. Verify the request's Access token exactly as an API call's.
//  4. GET: show the confirmation page (who, which port, the code) with a
//     Continue form carrying a confirmation (see loginConfirmer) and a
//     Cancel link to the callback. It never redirects the token.
//     POST: check the confirmation, then redirect to the callback with
//     token and state.
//
// A refusal is a 400 page while the callback or state is unusable, and
// otherwise a redirect to the callback with error and state, so the CLI
// ends with the reason instead of waiting (its page shows it too).
func (s *Server) loginHandler() http.Handler {
	// Replicas behind one address must agree on the key, since the page's
	// GET and its POST may reach different ones: it is derived from the
	// controller secret they share. Without one (tests) a random key lives
	// as long as the process, and a restart only voids the pages in flight.
	var key []byte
	if s.controllers != nil {
		key = s.controllers.Derive("falcon login confirmation v1")
	} else {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	conf := loginConfirmer{key: key, now: s.now}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", loginCSP(""))
		var q url.Values
		switch r.Method {
		case http.MethodGet:
			q = r.URL.Query()
		case http.MethodPost:
			r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
			if err := r.ParseForm(); err != nil {
				http.Error(w, "unreadable form: "+err.Error(), http.StatusBadRequest)
				return
			}
			q = r.PostForm // never the URL's query: the form is what was confirmed
		default:
			h.Set("Allow", "GET, POST")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
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
			to := *cb
			to.RawQuery = v.Encode()
			http.Redirect(w, r, to.String(), http.StatusSeeOther)
		}
		code := q.Get("code")
		if err := checkCode(code); err != nil {
			back(url.Values{"error": {err.Error()}})
			return
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
		if r.Method == http.MethodGet {
			s.log.Info("login confirmation shown", "user", p.Display(), "user_id", p.UserID, "callback", cb.Host)
			confirmPage(w, cb, state, code, p, conf.make(cb.String(), state, code, p.UserID))
			return
		}
		if err := conf.check(q.Get("confirm"), cb.String(), state, code, p.UserID); err != nil {
			s.log.Warn("login refused", "from", r.RemoteAddr, "user_id", p.UserID, "reason", err.Error())
			back(url.Values{"error": {err.Error()}})
			return
		}
		s.log.Info("login", "user", p.Display(), "user_id", p.UserID, "expires", exp, "callback", cb.Host)
		back(url.Values{"token": {tok}})
	})
}

// loginConfirmer makes and checks the confirmation the page's form
// carries: "EXPIRY.MAC", EXPIRY in Unix seconds and MAC an HMAC-SHA256,
// under a key only this server holds, over the expiry, callback, state,
// code and the user's id. Only someone who loaded the page as that user
// has it, so another site cannot forge the POST, and it cannot be moved
// to another login, port or user, nor used after it expires.
type loginConfirmer struct {
	key []byte
	now func() time.Time
}

var (
	errConfirmInvalid = errors.New("login refused: the confirmation is missing or does not belong to this login; run `falcon auth login` again and press Continue on its page")
	errConfirmExpired = fmt.Errorf("login refused: the confirmation page expired (it is good for %s); run `falcon auth login` again", LoginConfirmTTL)
)

func (c loginConfirmer) make(callback, state, code, userID string) string {
	exp := c.now().Add(LoginConfirmTTL).Unix()
	return strconv.FormatInt(exp, 10) + "." + base64.RawURLEncoding.EncodeToString(c.mac(exp, callback, state, code, userID))
}

func (c loginConfirmer) check(confirm, callback, state, code, userID string) error {
	e, m, _ := strings.Cut(confirm, ".")
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil {
		return errConfirmInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(m)
	if err != nil || !hmac.Equal(got, c.mac(exp, callback, state, code, userID)) {
		return errConfirmInvalid
	}
	if !c.now().Before(time.Unix(exp, 0)) {
		return errConfirmExpired
	}
	return nil
}

// mac joins the fields with newlines, which none but the last (the user
// id, from the token) can contain: url.Parse refuses control characters,
// and checkState and checkCode all but letters and digits. So no two
// inputs share a MAC.
func (c loginConfirmer) mac(exp int64, callback, state, code, userID string) []byte {
	h := hmac.New(sha256.New, c.key)
	fmt.Fprintf(h, "falcon login confirmation\n%d\n%s\n%s\n%s\n%s", exp, callback, state, code, userID)
	return h.Sum(nil)
}

// loginCSS is the page's only style, allowed by its hash: the page runs
// no script and loads nothing.
const loginCSS = `body{font-family:system-ui,sans-serif;max-width:36em;margin:3em auto;padding:0 1em;line-height:1.5}` +
	`.code{font:bold 2em ui-monospace,monospace;letter-spacing:.1em}` +
	`button,a.button{font:inherit;padding:.4em 1.2em;margin-right:1em;border:1px solid #666;border-radius:4px;color:inherit;background:none;text-decoration:none;cursor:pointer}` +
	`button{background:#1a5fb4;border-color:#1a5fb4;color:#fff}`

var loginCSSHash = func() string {
	sum := sha256.Sum256([]byte(loginCSS))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

// loginCSP forbids framing (clickjacking the Continue button), scripts and
// every load but the page's style, and lets the form go only to this
// server and, through its redirect, to formTarget (the callback's origin).
func loginCSP(formTarget string) string {
	return "default-src 'none'; style-src " + loginCSSHash + "; form-action 'self'" + formTarget +
		"; frame-ancestors 'none'; base-uri 'none'"
}

// cspSource is the callback's origin as a CSP source. CSP has no syntax
// for IPv6 literals, so [::1] is allowed as any http: target.
func cspSource(cb *url.URL) string {
	if ip := net.ParseIP(cb.Hostname()); ip != nil && ip.To4() == nil {
		return " http:"
	}
	return " http://" + cb.Host
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Falcon login: confirm</title><style>` + loginCSS + `</style></head>
<body><main>
<h1>Log in to Falcon on the command line?</h1>
<p>You are signed in as <strong>{{.User}}</strong>. Continuing hands your Falcon login
to the <code>falcon</code> command listening on port <strong>{{.Port}}</strong> of this computer ({{.Listener}}).</p>
<p>It shows the code</p>
<p class="code">{{.Code}}</p>
<p>Continue only if this is the code <code>falcon auth login</code> shows in your terminal.
If it differs, or you did not just run that command, press Cancel: someone may be trying to take your login.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="callback" value="{{.Callback}}">
<input type="hidden" name="state" value="{{.State}}">
<input type="hidden" name="code" value="{{.Code}}">
<input type="hidden" name="confirm" value="{{.Confirm}}">
<button type="submit">Continue</button><a class="button" href="{{.Cancel}}" rel="noreferrer">Cancel</a>
</form>
</main></body></html>
`))

// confirmPage renders the confirmation page, whose form POSTs the
// login back here with the confirmation.
func confirmPage(w http.ResponseWriter, cb *url.URL, state, code string, p auth.Principal, confirm string) {
	cancel := *cb
	cancel.RawQuery = url.Values{"error": {"you cancelled the login in the browser"}, "state": {state}}.Encode()
	w.Header().Set("Content-Security-Policy", loginCSP(cspSource(cb)))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = loginPage.Execute(w, map[string]string{
		"User": p.Display(), "Port": cb.Port(), "Listener": cb.Host, "Code": code,
		"Action": LoginPath, "Callback": cb.String(), "State": state, "Confirm": confirm,
		"Cancel": cancel.String(),
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

// checkCode accepts the CLI's confirmation code, XXXX-XXXX in capital
// letters and digits. The server only shows it; the user compares it.
func checkCode(s string) error {
	if s == "" {
		return fmt.Errorf("the login link has no confirmation code: update the falcon CLI and run `falcon auth login` again")
	}
	if len(s) != 9 || s[4] != '-' {
		return fmt.Errorf("code must be XXXX-XXXX")
	}
	for i, c := range []byte(s) {
		if i != 4 && !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return fmt.Errorf("code must be capital letters and digits")
		}
	}
	return nil
}
