package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/changefeed"
)

// Prefix is where the dashboard is mounted.
const Prefix = "/ui/"

// Forward returns r's context carrying, as outgoing gRPC metadata, the
// credentials the HTTP gateway would forward for r, so that a call made
// for r is authenticated as r's caller. The API server passes its own, so
// the dashboard and the gateway can never disagree on what they forward.
type Forward func(r *http.Request) context.Context

// Handler serves the dashboard.
type Handler struct {
	exps     falconv1.ExperimentServiceClient
	jobs     falconv1.JobServiceClient
	arts     falconv1.ArtifactServiceClient
	clusters falconv1.ClusterServiceClient
	forward  Forward

	feed      *changefeed.Feed // nil: the list's live status only polls
	life      context.Context  // event streams end when it does
	now       func() time.Time
	log       *slog.Logger
	poll      time.Duration // the live list's safety-net read
	heartbeat time.Duration // an idle event stream's keep-alive

	pages map[string]*template.Template
	mux   *http.ServeMux
}

var _ http.Handler = (*Handler)(nil)

// Option configures a Handler.
type Option func(*Handler)

// WithFeed wakes the live experiment list when the server writes one of
// the experiments shown (the API server's own change feed).
func WithFeed(f *changefeed.Feed) Option { return func(h *Handler) { h.feed = f } }

// WithLifetime ends every event stream when ctx ends: the server is
// stopping, and its graceful shutdown would otherwise wait for streams that
// never end by themselves. Browsers reconnect and resume where they were.
func WithLifetime(ctx context.Context) Option { return func(h *Handler) { h.life = ctx } }

// WithClock injects the clock pages compute ages with.
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.now = now } }

// WithLogger sets where failures to render are logged.
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithPoll sets how often the live list re-reads its experiments without a
// wake-up from the feed: the bound on how late a change written through
// another API server replica shows.
func WithPoll(d time.Duration) Option { return func(h *Handler) { h.poll = d } }

// WithHeartbeat sets how long an event stream may be silent before it is
// sent a comment: proxies close idle connections (Cloudflare after 100 s).
func WithHeartbeat(d time.Duration) Option { return func(h *Handler) { h.heartbeat = d } }

// New serves the dashboard through conn, the API server's own services,
// calling them as each request's caller (forward).
func New(conn grpc.ClientConnInterface, forward Forward, opts ...Option) *Handler {
	h := &Handler{
		exps:      falconv1.NewExperimentServiceClient(conn),
		jobs:      falconv1.NewJobServiceClient(conn),
		arts:      falconv1.NewArtifactServiceClient(conn),
		clusters:  falconv1.NewClusterServiceClient(conn),
		forward:   forward,
		life:      context.Background(),
		now:       func() time.Time { return time.Now().UTC() },
		log:       slog.Default(),
		poll:      5 * time.Second,
		heartbeat: 25 * time.Second,
		pages:     parsePages(),
	}
	for _, o := range opts {
		o(h)
	}
	m := http.NewServeMux()
	m.HandleFunc("GET /ui/{$}", h.listPage)
	m.HandleFunc("GET /ui/live", h.listLive)
	m.HandleFunc("GET /ui/experiments/{id}", h.expPage)
	m.HandleFunc("GET /ui/experiments/{id}/live", h.expLive)
	m.HandleFunc("GET /ui/clusters", h.clustersPage)
	m.HandleFunc("GET /ui/compare", h.comparePage)
	m.HandleFunc("GET /ui/assets/{name}", h.serveAsset)
	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.fail(w, r, httpError{http.StatusMethodNotAllowed, "Method not allowed", "The dashboard only reads: " + r.Method + " is not served here."})
			return
		}
		h.fail(w, r, httpError{http.StatusNotFound, "Page not found", "Nothing is served at " + r.URL.Path + "."})
	})
	h.mux = m
	return h
}

// securityHeaders keep every page to what this server sends: no script,
// style or connection from anywhere else, no framing, no sniffing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

// call is r's context for a call to the services as r's caller. Like the
// gateway, it appends the client's address to X-Forwarded-For, which the
// server believes from loopback only, so refusals are logged with the
// browser's address rather than the server's own.
func (h *Handler) call(r *http.Request) context.Context {
	ctx := h.forward(r)
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		xff := host
		if prior := r.Header.Get("X-Forwarded-For"); prior != "" {
			xff = prior + ", " + host
		}
		ctx = metadata.AppendToOutgoingContext(ctx, "x-forwarded-for", xff)
	}
	return ctx
}

// stream is r with a context that also ends with the handler's lifetime,
// for the requests that stream until the browser leaves.
func (h *Handler) stream(r *http.Request) (*http.Request, func()) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(h.life, cancel)
	return r.WithContext(ctx), func() { stop(); cancel() }
}

// httpError is a page that could not be shown.
type httpError struct {
	Code    int
	Title   string
	Message string
}

func (e httpError) Error() string { return e.Message }

// badRequest names the query parameter the user typed and what is allowed.
func badRequest(param, format string, args ...any) httpError {
	return httpError{http.StatusBadRequest, "Bad request", param + ": " + fmt.Sprintf(format, args...)}
}

// pageError turns a call's error into the page to show: the HTTP status the
// gateway gives the same gRPC code (runtime.HTTPStatusFromCode, the one
// mapping), and the server's message, which is what the API says too.
func pageError(err error) httpError {
	var he httpError
	if errors.As(err, &he) {
		return he
	}
	st, _ := status.FromError(err)
	e := httpError{Code: runtime.HTTPStatusFromCode(st.Code()), Message: st.Message()}
	switch st.Code() {
	case codes.NotFound:
		e.Title = "Not found"
	case codes.Unauthenticated:
		e.Title = "Sign in required"
		e.Message += ". Open the dashboard through Cloudflare Access (which sets the CF_Authorization cookie), or send a token as the API accepts it."
	case codes.PermissionDenied:
		e.Title = "Not allowed"
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		e.Title = "Bad request"
	case codes.Canceled:
		e.Title = "Cancelled"
	default:
		e.Title = "The server could not answer"
	}
	return e
}

// fail renders the error page for err.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the browser went away
	}
	e := pageError(err)
	if e.Code >= 500 {
		h.log.Warn("dashboard page failed", "path", r.URL.Path, "code", e.Code, "err", err)
	}
	h.render(w, r, e.Code, "error.html", page{Title: e.Title, Data: e})
}

// page is what every template is given: the title, the section of the
// navigation it belongs to, and its own data.
type page struct {
	Title string
	Nav   string
	Now   time.Time
	Data  any
}

// render executes a page into memory first, so a template error is a 500
// page rather than half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	t := h.pages[name]
	if p.Now.IsZero() {
		p.Now = h.now()
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		h.log.Error("dashboard template failed", "template", name, "err", err)
		if name != "error.html" {
			h.render(w, r, http.StatusInternalServerError, "error.html", page{Title: "Internal error",
				Data: httpError{http.StatusInternalServerError, "Internal error", "The page could not be rendered."}})
		}
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// query reads a trimmed query parameter.
func query(r *http.Request, name string) string { return strings.TrimSpace(r.URL.Query().Get(name)) }
