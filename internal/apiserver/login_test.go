package apiserver_test

import (
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// loginEnv is a server checking Cloudflare Access tokens whose own clock
// (the one the login confirmation expires by) can be moved ahead.
type loginEnv struct {
	addr string
	iss  *authtest.Issuer
	skew *atomic.Int64 // the server's clock ahead of real time (nanoseconds)
}

func startLogin(t *testing.T) *loginEnv {
	t.Helper()
	iss := authtest.NewIssuer(t)
	cf, err := auth.NewCloudflareAccess(context.Background(), iss.Config())
	if err != nil {
		t.Fatal(err)
	}
	skew := &atomic.Int64{}
	env := apitest.StartWith(t, apitest.Options{Server: []apiserver.Option{
		apiserver.WithAuthenticator(cf),
		apiserver.WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }),
		apiserver.WithLogger(slog.New(slog.DiscardHandler)),
	}})
	return &loginEnv{addr: env.HTTPAddr, iss: iss, skew: skew}
}

// noFollow is a browser that stops at a redirect, to see where it goes.
var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends method to the login endpoint: q in the URL, form (if not nil)
// as the body, tok as the Access token (if not empty).
func (e *loginEnv) do(t *testing.T, method string, q, form url.Values, tok string) (*http.Response, string) {
	t.Helper()
	return doLogin(t, e.addr, method, q, form, http.Header{auth.AssertionHeader: {tok}})
}

func doLogin(t *testing.T, addr, method string, q, form url.Values, h http.Header) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, "http://"+addr+apiserver.LoginPath+"?"+q.Encode(), body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		if len(v) > 0 && v[0] != "" {
			req.Header[k] = v
		}
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

const (
	loginState = "0123456789abcdefXYZ_-"
	loginCode  = "K7QM-4XWD"
)

func loginQuery(callback, state, code string) url.Values {
	return url.Values{"callback": {callback}, "state": {state}, "code": {code}}
}

var (
	hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`)
	cancelLink  = regexp.MustCompile(`<a class="button" href="([^"]*)"`)
)

// confirmForm is what the page's Continue button would POST.
func confirmForm(t *testing.T, page string) url.Values {
	t.Helper()
	form := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(page, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	if form.Get("confirm") == "" {
		t.Fatalf("the page has no confirmation form:\n%s", page)
	}
	return form
}

// redirected is where a response sends the browser: the callback's
// address and query, or nil if it does not redirect.
func redirected(resp *http.Response) *url.URL {
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.Header.Get("Location") == "" || err != nil {
		return nil
	}
	return loc
}

func TestLoginPageShowsWhoWhereAndTheCode(t *testing.T) {
	e := startLogin(t)
	for _, tc := range []struct {
		name, email, wantUser string
	}{
		{name: "plain", email: "alice@example.com", wantUser: "alice@example.com"},
		{name: "markup in the email is escaped", email: `eve<script>x</script>@example.com`, wantUser: "eve&lt;script&gt;x&lt;/script&gt;@example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := e.iss.Token(tc.email)
			resp, page := e.do(t, http.MethodGet, loginQuery("http://127.0.0.1:49152/callback", loginState, loginCode), nil, tok)
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("GET: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			for _, want := range []string{tc.wantUser, `<p class="code">` + loginCode + `</p>`, "port <strong>49152</strong>", "Continue", "Cancel"} {
				if !strings.Contains(page, want) {
					t.Errorf("the page lacks %q:\n%s", want, page)
				}
			}
			if strings.Contains(page, "<script>") {
				t.Errorf("the page carries unescaped markup:\n%s", page)
			}
			// A GET alone never hands the token anywhere.
			if loc := resp.Header.Get("Location"); loc != "" || strings.Contains(page, tok) {
				t.Errorf("GET redirected to %q or showed the token", loc)
			}
			form := confirmForm(t, page)
			if form.Get("callback") != "http://127.0.0.1:49152/callback" || form.Get("state") != loginState || form.Get("code") != loginCode {
				t.Errorf("form %v", form)
			}
			m := cancelLink.FindStringSubmatch(page)
			if m == nil {
				t.Fatalf("no Cancel link:\n%s", page)
			}
			cancel, _ := url.Parse(html.UnescapeString(m[1]))
			if cancel.Host != "127.0.0.1:49152" || cancel.Path != "/callback" || cancel.Query().Get("state") != loginState ||
				!strings.Contains(cancel.Query().Get("error"), "cancelled") || cancel.Query().Get("token") != "" {
				t.Errorf("Cancel goes to %s", cancel)
			}
		})
	}
}

func TestLoginPageCannotBeFramed(t *testing.T) {
	e := startLogin(t)
	resp, _ := e.do(t, http.MethodGet, loginQuery("http://127.0.0.1:49152/callback", loginState, loginCode), nil, e.iss.Token("alice@example.com"))
	for h, want := range map[string]string{
		"X-Frame-Options":        "DENY",
		"Cache-Control":          "no-store",
		"Referrer-Policy":        "no-referrer",
		"X-Content-Type-Options": "nosniff",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self' http://127.0.0.1:49152;", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "script-src") || strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q allows scripts or inline code", csp)
	}
}

func TestLoginConfirmation(t *testing.T) {
	e := startLogin(t)
	alice, bob := e.iss.Token("alice@example.com"), e.iss.Token("bob@example.com")
	const callback = "http://127.0.0.1:49152/callback"
	resp, page := e.do(t, http.MethodGet, loginQuery(callback, loginState, loginCode), nil, alice)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d %s", resp.StatusCode, page)
	}
	confirmed := confirmForm(t, page)
	with := func(k, v string) url.Values {
		f := url.Values{}
		for key, vals := range confirmed {
			f[key] = vals
		}
		if v == "" {
			f.Del(k)
		} else {
			f.Set(k, v)
		}
		return f
	}
	conf := confirmed.Get("confirm")
	exp, mac, _ := strings.Cut(conf, ".")
	flipped := []byte(mac)
	flipped[0] ^= 1

	for _, tc := range []struct {
		name  string
		form  url.Values
		query url.Values // in the URL instead of the body
		tok   string
		skew  time.Duration // the server's clock moved ahead
		// want: the status, and the callback's host and error (or token if
		// wantErr is empty).
		wantStatus int
		wantHost   string
		wantErr    string
	}{
		{name: "confirmed", form: confirmed, tok: alice, wantStatus: http.StatusSeeOther, wantHost: "127.0.0.1:49152"},
		{name: "confirmed just before it expires", form: confirmed, tok: alice, skew: apiserver.LoginConfirmTTL - 5*time.Second,
			wantStatus: http.StatusSeeOther, wantHost: "127.0.0.1:49152"},
		{name: "expired", form: confirmed, tok: alice, skew: apiserver.LoginConfirmTTL,
			wantStatus: http.StatusSeeOther, wantHost: "127.0.0.1:49152", wantErr: "confirmation page expired"},
		{name: "without confirmation", form: with("confirm", ""), tok: alice,
			wantStatus: http.StatusSeeOther, wantHost: "127.0.0.1:49152", wantErr: "confirmation is missing or does not belong"},
		{name: "tampered MAC", form: with("confirm", exp+"."+string(flipped)), tok: alice,
			wantStatus: http.StatusSeeOther, wantHost: "127.0.0.1:49152", wantErr: "confirmation is missing or does not belong"},
		{name: "expiry pushed later", form: with("confirm", "9"+exp+"."+mac), tok: alice,
			wantStatus: http.StatusSeeOther, wantHost: "127.0.0.1:49152", wantErr: "confirmation is missing or does not belong"},
		{name: "garbage", form: with("confirm", "not a confirmation"), tok: alice,
			wantStatus: http.StatusSeeOther, wantHost: "127.0.0.1:49152", wantErr: "confirmation is missing or does not belong"},
		{name: "another user", form: confirmed, tok: bob,
			wantStatus: http.StatusSeeOther, wantHost: "127.0.0.1:49152", wantErr: "confirmation is missing or does not belong"},
		{name: "another port", form: with("callback", "http://127.0.0.1:40000/callback"), tok: alice,
			wantStatus: http.StatusSeeOther, wantHost: "127.0.0.1:40000", wantErr: "confirmation is missing or does not belong"},
		{name: "another state", form: with("state", "another-state-0123456789"), tok: alice,
			wantStatus: http.StatusSeeOther, wantHost: "127.0.0.1:49152", wantErr: "confirmation is missing or does not belong"},
		{name: "another code", form: with("code", "ABCD-EFGH"), tok: alice,
			wantStatus: http.StatusSeeOther, wantHost: "127.0.0.1:49152", wantErr: "confirmation is missing or does not belong"},
		{name: "no Access token", form: confirmed,
			wantStatus: http.StatusSeeOther, wantHost: "127.0.0.1:49152", wantErr: "without a Cloudflare Access token"},
		{name: "fields in the URL, not the form", form: url.Values{}, query: confirmed, tok: alice, wantStatus: http.StatusBadRequest},
		{name: "a callback off this machine", form: with("callback", "http://evil.example.com:80/cb"), tok: alice, wantStatus: http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.skew.Store(int64(tc.skew))
			defer e.skew.Store(0)
			resp, body := e.do(t, http.MethodPost, tc.query, tc.form, tc.tok)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("POST: %d %s, want %d", resp.StatusCode, body, tc.wantStatus)
			}
			loc := redirected(resp)
			if tc.wantHost == "" {
				if loc != nil {
					t.Errorf("refused with a redirect to %s", loc)
				}
				return
			}
			if loc == nil || loc.Host != tc.wantHost || loc.Path != "/callback" || loc.Query().Get("state") != tc.form.Get("state") {
				t.Fatalf("Location %q", resp.Header.Get("Location"))
			}
			q := loc.Query()
			if tc.wantErr == "" {
				if q.Get("token") != alice || q.Get("error") != "" {
					t.Errorf("confirmed, but Location %q", resp.Header.Get("Location"))
				}
				return
			}
			if q.Get("token") != "" || !strings.Contains(q.Get("error"), tc.wantErr) {
				t.Errorf("Location %q, want no token and error %q", resp.Header.Get("Location"), tc.wantErr)
			}
		})
	}
}

func TestLoginRefusesOtherMethods(t *testing.T) {
	e := startLogin(t)
	for _, m := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch} {
		resp, _ := e.do(t, m, loginQuery("http://127.0.0.1:49152/callback", loginState, loginCode), nil, e.iss.Token("alice@example.com"))
		if resp.StatusCode != http.StatusMethodNotAllowed || redirected(resp) != nil {
			t.Errorf("%s: %d Location %q", m, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}

// Replicas behind one address share the controller secret, and with it the
// confirmation key: the page's GET and its POST may reach different ones.
func TestLoginConfirmationAcrossReplicas(t *testing.T) {
	iss := authtest.NewIssuer(t)
	replica := func(secret string) string {
		cf, err := auth.NewCloudflareAccess(context.Background(), iss.Config())
		if err != nil {
			t.Fatal(err)
		}
		cs, err := auth.NewControllerSecret(secret)
		if err != nil {
			t.Fatal(err)
		}
		env := apitest.StartWith(t, apitest.Options{Server: []apiserver.Option{
			apiserver.WithAuthenticator(cf), apiserver.WithControllerSecret(cs),
			apiserver.WithLogger(slog.New(slog.DiscardHandler)),
		}})
		return env.HTTPAddr
	}
	shared := strings.Repeat("s", 32)
	a, b, other := replica(shared), replica(shared), replica(strings.Repeat("o", 32))
	tok := iss.Token("alice@example.com")
	h := http.Header{auth.AssertionHeader: {tok}}
	q := loginQuery("http://127.0.0.1:49152/callback", loginState, loginCode)
	resp, page := doLogin(t, a, http.MethodGet, q, nil, h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d %s", resp.StatusCode, page)
	}
	form := confirmForm(t, page)
	for _, tc := range []struct {
		name    string
		addr    string
		wantErr bool
	}{{"same secret", b, false}, {"another secret", other, true}} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := doLogin(t, tc.addr, http.MethodPost, loginQuery("", "", ""), form, h)
			loc := redirected(resp)
			if loc == nil {
				t.Fatalf("POST: %d %s, want a redirect to the callback", resp.StatusCode, body)
			}
			gotTok, gotErr := loc.Query().Get("token"), loc.Query().Get("error")
			if tc.wantErr && (gotTok != "" || gotErr == "") || !tc.wantErr && (gotTok != tok || gotErr != "") {
				t.Errorf("redirect to %s (token %t, error %q), want error %t", loc.Host, gotTok != "", gotErr, tc.wantErr)
			}
		})
	}
}
