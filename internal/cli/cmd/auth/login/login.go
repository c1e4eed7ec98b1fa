package login

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/credentials"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
)

// LoginPath is the server's login endpoint (apiserver.LoginPath).
const LoginPath = "/auth/login"

// Options are the inputs of `falcon auth login`.
type Options struct {
	IO          *iostreams.IOStreams
	Server      func() (string, error)
	Credentials func() (*credentials.Store, error)
	Printer     func() *output.Printer
	// OpenBrowser shows a URL to the user; nil or an error means the URL
	// is only printed.
	OpenBrowser func(url string) error

	NoBrowser bool
	Timeout   time.Duration
}

// NewCmdLogin builds the command. runF replaces loginRun in tests.
func NewCmdLogin(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Server: f.Server, Credentials: f.Credentials, Printer: f.Printer, OpenBrowser: SystemBrowser}
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Log in to a Falcon server through Cloudflare Access",
		Long: `Log in to the server named by --server (or FALCON_SERVER) through Cloudflare
Access in your browser, and cache the token in ~/.falcon/credentials
($FALCON_CONFIG_DIR/credentials if set) for later commands.

The browser opens the server's login page; after you log in with Cloudflare
Access, it shows a code. Press Continue only if it is the code this command
prints: the server then hands the token back to a listener this command runs
on 127.0.0.1. Without a browser (over SSH, say), open the printed URL on a
machine whose 127.0.0.1 reaches this one, e.g. through ssh -L.

falcon dev needs no login. For CI and agents, set FALCON_TOKEN instead.`,
		Example: `  falcon auth login --server https://falcon.example.com`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return loginRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.NoBrowser, "no-browser", false, "Print the login URL instead of opening a browser")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "How long to wait for the browser to finish")
	return cmd
}

// callback is what the server's redirect delivered.
type callback struct {
	token string
	err   error
}

func loginRun(ctx context.Context, opts *Options) error {
	server, err := opts.Server()
	if err != nil {
		return err
	}
	store, err := opts.Credentials()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen on loopback for the login callback: %w", err)
	}
	state, code := randomState(), confirmationCode()
	results := make(chan callback, 1)
	srv := &http.Server{Handler: callbackHandler(state, results), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Shutdown below
	defer func() {
		// Let the callback's answer reach the browser, but never hang on it.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	loginURL := server + LoginPath + "?" + url.Values{
		"callback": {"http://" + ln.Addr().String() + "/callback"},
		"state":    {state},
		"code":     {code},
	}.Encode()
	// The port as well as the code: on a shared machine others can read
	// the browser's command line, code included, but cannot listen on
	// this port.
	fmt.Fprintf(opts.IO.ErrOut, "Confirm in the browser that it shows the code %s and port %d, and continue there only if both match.\n",
		code, ln.Addr().(*net.TCPAddr).Port)
	opened := false
	if !opts.NoBrowser && opts.OpenBrowser != nil {
		opened = opts.OpenBrowser(loginURL) == nil
	}
	if opened {
		fmt.Fprintf(opts.IO.ErrOut, "Opening your browser to log in to %s.\nIf it does not open, visit:\n  %s\n", server, loginURL)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "To log in to %s, open this URL in a browser:\n  %s\n", server, loginURL)
	}

	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	var got callback
	select {
	case got = <-results:
	case <-ctx.Done():
		return status.Error(codes.Canceled, "login cancelled")
	case <-time.After(timeout):
		return status.Errorf(codes.DeadlineExceeded, "no login within %s; run `falcon auth login` again", timeout)
	}
	if got.err != nil {
		return got.err
	}

	_, expiry, err := credentials.UserOf(got.token)
	if err != nil {
		return status.Errorf(codes.Unauthenticated, "the server handed back something that is not a token: %v", err)
	}
	// Ask the server who the token names: it proves the token works
	// through everything in between (Cloudflare Access included) before it
	// is cached, and registers the user.
	c, err := client.New(server, client.WithToken(func(context.Context) (string, error) { return got.token, nil }))
	if err != nil {
		return err
	}
	me, err := c.GetCurrentUser(ctx, &falconv1.GetCurrentUserRequest{})
	if err != nil {
		return fmt.Errorf("the new token was refused: %w", err)
	}
	user := me.GetEmail()
	if user == "" {
		user = me.GetUserId()
	}
	if err := store.Put(server, credentials.Entry{Token: got.token, Expiry: expiry, User: user}); err != nil {
		return err
	}
	msg, err := structpb.NewStruct(map[string]any{
		"server": server, "user": user, "user_id": me.GetUserId(),
		"expires_at": expiry.UTC().Format(time.RFC3339), "credentials": store.Path,
	})
	if err != nil {
		return err
	}
	return opts.Printer().Print(msg, func(v output.View) error {
		_, err := fmt.Fprintf(v.Out, "Logged in to %s as %s (until %s).\n", server, user, expiry.Local().Format("2006-01-02 15:04 MST"))
		return err
	})
}

func randomState() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// codeAlphabet is 32 characters without the look-alikes 0, O, 1 and I, so
// each random byte picks one without bias.
const codeAlphabet = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"

// confirmationCode makes the code the user compares between this terminal
// and the server's login page, as XXXX-XXXX. A login link someone else
// made (naming their own listener) shows their code, not this one.
//
// The callback does not carry the code back: the server only redirects
// once the user has confirmed a page showing it, and the state already
// ties the callback to this login, so checking it here would add nothing.
func confirmationCode() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	out := make([]byte, 0, 9)
	for i, c := range b {
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, codeAlphabet[c%byte(len(codeAlphabet))])
	}
	return string(out)
}

// callbackHandler answers the browser's one redirect to /callback and
// delivers the outcome once; later requests are told the login is over.
func callbackHandler(state string, results chan<- callback) http.Handler {
	var claimed atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if r.URL.Path != "/callback" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		var c callback
		switch {
		case subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1:
			c.err = status.Error(codes.Unauthenticated, "login refused: the callback's state does not match this login (a stale or forged redirect); run `falcon auth login` again")
		case q.Get("error") != "":
			c.err = status.Errorf(codes.Unauthenticated, "the server refused the login: %s", q.Get("error"))
		case q.Get("token") == "":
			c.err = status.Error(codes.Unauthenticated, "the server's callback carried no token")
		default:
			c.token = q.Get("token")
		}
		if !claimed.CompareAndSwap(false, true) {
			page(w, http.StatusConflict, "This login has already finished. Return to your terminal.")
			return
		}
		// The page is written before the outcome is delivered: delivering
		// ends the login and closes this listener, which would otherwise
		// cut the browser off mid-answer.
		if c.err != nil {
			page(w, http.StatusBadRequest, "Login failed: "+status.Convert(c.err).Message())
		} else {
			page(w, http.StatusOK, "You are logged in to Falcon. You can close this tab and return to your terminal.")
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		results <- c
	})
}

// page answers with a small HTML page. It also drops the query (the token)
// from the address bar.
func page(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintf(w, `<!doctype html><html><head><meta charset="utf-8"><title>Falcon login</title></head>`+
		`<body><p>%s</p><script>history.replaceState(null, "", "/callback")</script></body></html>`, html.EscapeString(msg))
}

// errNoDisplay means there is no graphical session to open a browser in.
var errNoDisplay = errors.New("no display")

// SystemBrowser opens url in the user's browser ($BROWSER if set).
func SystemBrowser(url string) error {
	var cmd *exec.Cmd
	switch b := os.Getenv("BROWSER"); {
	case b != "":
		cmd = exec.Command(b, url)
	case runtime.GOOS == "darwin":
		cmd = exec.Command("open", url)
	case runtime.GOOS == "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return errNoDisplay
		}
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() //nolint:errcheck // reap the launcher; the browser outlives it
	return nil
}
