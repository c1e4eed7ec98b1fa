package login

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/cli/credentials"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// access stands in for Cloudflare Access in front of a real API server:
// a browser request gets the session's token injected (as if the user had
// just logged in); a request that shows a token in Cf-Access-Token (the
// CLI) gets that one forwarded, as the edge does.
type access struct {
	URL     string
	iss     *authtest.Issuer
	mu      sync.Mutex
	session string // the browser's Access token
}

func newAccess(t *testing.T) (*access, *apitest.Env) {
	t.Helper()
	iss := authtest.NewIssuer(t)
	cf, err := auth.NewCloudflareAccess(context.Background(), iss.Config())
	if err != nil {
		t.Fatal(err)
	}
	env := apitest.StartWith(t, apitest.Options{Server: []apiserver.Option{apiserver.WithAuthenticator(cf)}})
	a := &access{iss: iss, session: iss.Token("alice@example.com")}
	target, _ := url.Parse("http://" + env.HTTPAddr)
	proxy := httputil.NewSingleHostReverseProxy(target)
	inner := proxy.Director
	proxy.Director = func(r *http.Request) {
		inner(r)
		tok := r.Header.Get(auth.AccessTokenHeader)
		if tok == "" {
			a.mu.Lock()
			tok = a.session
			a.mu.Unlock()
		}
		r.Header.Set(auth.AssertionHeader, tok)
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a, env
}

func (a *access) setSession(tok string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.session = tok
}

// browser follows the login URL like a browser: to the server's login
// page, where it presses Continue (or Cancel), then through the redirect
// to the CLI's loopback callback. edit may change the URL first.
type browser struct {
	edit    func(u *url.URL)
	cancel  bool // press Cancel instead of Continue
	mu      sync.Mutex
	confirm string // the confirmation page, if the server showed one
	code    int    // the last page's status and body
	page    string
	err     error
	done    chan struct{}
}

func newBrowser(edit func(*url.URL)) *browser { return &browser{edit: edit, done: make(chan struct{})} }

var (
	hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`)
	formAction  = regexp.MustCompile(`<form method="post" action="([^"]*)">`)
	cancelLink  = regexp.MustCompile(`<a class="button" href="([^"]*)"`)
)

func (b *browser) open(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if b.edit != nil {
		b.edit(u)
	}
	go func() {
		defer close(b.done)
		confirm, code, page, err := b.visit(u)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.confirm, b.code, b.page, b.err = confirm, code, page, err
	}()
	return nil
}

// visit loads the login page and answers it as the user would.
func (b *browser) visit(u *url.URL) (confirm string, code int, page string, err error) {
	code, page, err = fetch(http.Get(u.String()))
	if err != nil || !strings.Contains(page, `name="confirm"`) {
		return "", code, page, err // refused before the confirmation
	}
	confirm = page
	if b.cancel {
		m := cancelLink.FindStringSubmatch(page)
		if m == nil {
			return confirm, 0, "", fmt.Errorf("no Cancel link on the page:\n%s", page)
		}
		code, page, err = fetch(http.Get(html.UnescapeString(m[1])))
		return confirm, code, page, err
	}
	m := formAction.FindStringSubmatch(page)
	if m == nil {
		return confirm, 0, "", fmt.Errorf("no form on the page:\n%s", page)
	}
	action, err := u.Parse(html.UnescapeString(m[1]))
	if err != nil {
		return confirm, 0, "", err
	}
	form := url.Values{}
	for _, in := range hiddenInput.FindAllStringSubmatch(page, -1) {
		form.Set(in[1], html.UnescapeString(in[2]))
	}
	code, page, err = fetch(http.PostForm(action.String(), form))
	return confirm, code, page, err
}

func fetch(resp *http.Response, err error) (int, string, error) {
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func (b *browser) result(t *testing.T) (int, string) {
	t.Helper()
	b.wait(t)
	return b.code, b.page
}

// confirmation is the confirmation page the browser was shown.
func (b *browser) confirmation(t *testing.T) string {
	t.Helper()
	b.wait(t)
	return b.confirm
}

func (b *browser) wait(t *testing.T) {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the browser never finished")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		t.Fatal(b.err)
	}
}

func setup(t *testing.T, server string, b *browser) (*Options, *credentials.Store, func() (string, string)) {
	t.Helper()
	ios, _, out, errOut := iostreams.Test()
	store := &credentials.Store{Path: filepath.Join(t.TempDir(), "falcon", credentials.FileName)}
	opts := &Options{
		IO:          ios,
		Server:      func() (string, error) { return client.NormalizeServer(server) },
		Credentials: func() (*credentials.Store, error) { return store, nil },
		Printer:     func() *output.Printer { return output.New(out, errOut, output.Table, nil) },
		Timeout:     20 * time.Second,
	}
	if b != nil {
		opts.OpenBrowser = b.open
	}
	return opts, store, func() (string, string) { return out.String(), errOut.String() }
}

func TestLoginEndToEnd(t *testing.T) {
	a, env := newAccess(t)
	b := newBrowser(nil)
	opts, store, streams := setup(t, a.URL, b)
	if err := loginRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	stdout, stderr := streams()
	if !strings.Contains(stdout, "Logged in to "+a.URL+" as alice@example.com") {
		t.Errorf("stdout %q", stdout)
	}
	m := regexp.MustCompile(`(?s)shows the code (\w{4}-\w{4}) and port (\d+),.*` + regexp.QuoteMeta(LoginPath) + `\?callback=http%3A%2F%2F127.0.0.1%3A(\d+)%2Fcallback&code=(\w{4}-\w{4})&state=`).FindStringSubmatch(stderr)
	if m == nil || m[1] != m[4] || m[2] != m[3] {
		t.Fatalf("stderr does not show the code and a login URL carrying it: %q", stderr)
	}
	// The browser was asked to confirm, showing who, where and the code.
	confirm := b.confirmation(t)
	for _, want := range []string{"alice@example.com", "port <strong>" + m[2] + "</strong>", ">" + m[1] + "<"} {
		if !strings.Contains(confirm, want) {
			t.Errorf("the confirmation page lacks %q:\n%s", want, confirm)
		}
	}
	if code, page := b.result(t); code != http.StatusOK || !strings.Contains(page, "You are logged in") || strings.Contains(page, a.session) {
		t.Errorf("browser got %d %q", code, page)
	}

	fi, err := os.Stat(store.Path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials file mode %v, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(store.Path)); di.Mode().Perm() != 0o700 {
		t.Errorf("credentials dir mode %v, want 0700", di.Mode().Perm())
	}
	e, ok, err := store.Get(a.URL)
	if err != nil || !ok {
		t.Fatalf("no cached login: %v", err)
	}
	_, claims, _ := auth.Peek(a.session)
	if e.Token != a.session || e.User != "alice@example.com" || !e.Expiry.Equal(claims.Expiry) {
		t.Errorf("cached %+v", e)
	}
	// Logging in registered the user.
	if users, _ := env.Store.ListUsers(context.Background()); len(users) != 1 || users[0].Email != "alice@example.com" {
		t.Errorf("users %+v", users)
	}

	// The cached token now works for API calls through Access, as the
	// CLI's factory sends it.
	r := credentials.Resolver{Server: a.URL, Store: store, Getenv: func(string) string { return "" }, Now: time.Now}
	c, err := client.New(a.URL, client.WithToken(r.Token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListExps(context.Background(), &falconv1.ListExpsRequest{}); err != nil {
		t.Errorf("a call with the cached token: %v", err)
	}
	// Once it has expired, the CLI refuses to send it and says what to do.
	r.Now = func() time.Time { return claims.Expiry.Add(time.Second) }
	c, _ = client.New(a.URL, client.WithToken(r.Token))
	_, err = c.ListExps(context.Background(), &falconv1.ListExpsRequest{})
	if st := status.Convert(err); st.Code() != codes.Unauthenticated || !strings.Contains(st.Message(), "run `falcon auth login --server "+a.URL+"`") {
		t.Errorf("call with an expired login: %v", err)
	}
}

func TestLoginRefusesAStateMismatch(t *testing.T) {
	a, _ := newAccess(t)
	b := newBrowser(func(u *url.URL) {
		q := u.Query()
		q.Set("state", "forged-state-0123456789abcdef")
		u.RawQuery = q.Encode()
	})
	opts, store, _ := setup(t, a.URL, b)
	err := loginRun(context.Background(), opts)
	if st := status.Convert(err); st.Code() != codes.Unauthenticated || !strings.Contains(st.Message(), "state does not match") {
		t.Fatalf("login with a forged state: %v", err)
	}
	if code, page := b.result(t); code != http.StatusBadRequest || !strings.Contains(page, "state does not match") {
		t.Errorf("browser got %d %q", code, page)
	}
	if _, err := os.Stat(store.Path); !os.IsNotExist(err) {
		t.Errorf("credentials written after a refused login (%v)", err)
	}
}

func TestLoginReportsTheServersRefusal(t *testing.T) {
	a, _ := newAccess(t)
	c := a.iss.UserClaims("alice@example.com")
	c["exp"] = time.Now().Add(-time.Hour).Unix()
	a.setSession(authtest.Sign(a.iss.Key(), c))
	b := newBrowser(nil)
	opts, store, _ := setup(t, a.URL, b)
	err := loginRun(context.Background(), opts)
	if st := status.Convert(err); st.Code() != codes.Unauthenticated || !strings.Contains(st.Message(), "the server refused the login: token expired") {
		t.Fatalf("login with an expired Access session: %v", err)
	}
	if code, _ := b.result(t); code != http.StatusBadRequest {
		t.Errorf("browser got %d", code)
	}
	if _, err := os.Stat(store.Path); !os.IsNotExist(err) {
		t.Errorf("credentials written after a refused login (%v)", err)
	}
}

func TestLoginCancelledInTheBrowser(t *testing.T) {
	a, _ := newAccess(t)
	b := newBrowser(nil)
	b.cancel = true
	opts, store, _ := setup(t, a.URL, b)
	err := loginRun(context.Background(), opts)
	if st := status.Convert(err); st.Code() != codes.Unauthenticated || !strings.Contains(st.Message(), "you cancelled the login in the browser") {
		t.Fatalf("login cancelled in the browser: %v", err)
	}
	if code, page := b.result(t); code != http.StatusBadRequest || !strings.Contains(page, "cancelled") || strings.Contains(page, a.session) {
		t.Errorf("browser got %d %q", code, page)
	}
	if _, err := os.Stat(store.Path); !os.IsNotExist(err) {
		t.Errorf("credentials written after a cancelled login (%v)", err)
	}
}

func TestConfirmationCode(t *testing.T) {
	format := regexp.MustCompile(`^[` + codeAlphabet + `]{4}-[` + codeAlphabet + `]{4}$`)
	seen := map[string]bool{}
	for range 100 {
		c := confirmationCode()
		if !format.MatchString(c) || strings.ContainsAny(c, "01OI") {
			t.Fatalf("code %q", c)
		}
		seen[c] = true
	}
	if len(seen) < 99 {
		t.Errorf("%d distinct codes in 100", len(seen))
	}
}

func TestLoginWithoutABrowserPrintsTheURL(t *testing.T) {
	opened := false
	opts, _, streams := setup(t, "https://falcon.example.com/", nil)
	opts.OpenBrowser = func(string) error { opened = true; return nil }
	opts.NoBrowser = true
	opts.Timeout = 10 * time.Millisecond
	err := loginRun(context.Background(), opts)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("login nobody finished: %v", err)
	}
	if opened {
		t.Error("--no-browser opened a browser")
	}
	if _, stderr := streams(); !strings.Contains(stderr, "open this URL in a browser:\n  https://falcon.example.com/auth/login?callback=") {
		t.Errorf("stderr %q", stderr)
	}
}

func TestCallbackHandler(t *testing.T) {
	results := make(chan callback, 1)
	srv := httptest.NewServer(callbackHandler("the-state-0123456789", results))
	defer srv.Close()
	get := func(q string) int {
		resp, err := http.Get(srv.URL + "/callback?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("state=the-state-0123456789&token=a.b.c"); code != 200 {
		t.Fatalf("first callback: %d", code)
	}
	if got := <-results; got.token != "a.b.c" || got.err != nil {
		t.Errorf("delivered %+v", got)
	}
	if code := get("state=the-state-0123456789&token=x.y.z"); code != http.StatusConflict {
		t.Errorf("second callback: %d, want 409 (the login is over)", code)
	}
	select {
	case got := <-results:
		t.Errorf("a second result was delivered: %+v", got)
	default:
	}
}
