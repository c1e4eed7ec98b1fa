package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/artifactindex"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/changefeed"
	"github.com/falconhq/falcon/internal/cloudlog"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/metricsync"
	"github.com/falconhq/falcon/internal/refusallog"
	"github.com/falconhq/falcon/internal/store"
)

// Server implements every Falcon gRPC service over one store.
type Server struct {
	falconv1.UnimplementedExperimentServiceServer
	falconv1.UnimplementedJobServiceServer
	falconv1.UnimplementedArtifactServiceServer
	falconv1.UnimplementedClusterServiceServer
	falconv1.UnimplementedUserServiceServer
	falconv1.UnimplementedAuditServiceServer
	falconv1.UnimplementedAnalysisServiceServer

	store        store.Store
	auth         auth.Authenticator
	controllers  *auth.ControllerSecret // nil: no controller may connect
	admins       auth.Admins
	feed         *changefeed.Feed
	log          *slog.Logger
	now          func() time.Time
	artifactRoot blobstore.Location
	blobs        *blobstore.Opener
	index        *artifactindex.Indexer
	metrics      *metricsync.Syncer
	kube         KubeClients
	kubeConfigs  KubeConfigs // exec into pods
	localExec    LocalExec   // exec into falcon dev's ranks
	cloudlog     *cloudlog.Retriever
	logDir       string
	logPoll      time.Duration
	replicaPoll  time.Duration           // FollowReplicas; 0: off
	extra        map[string]http.Handler // more HTTP routes (metrics, readiness)
	tls          *tls.Config             // nil: plaintext
	grpcMetrics  *grpcprom.ServerMetrics // nil: not exported
	maxTTL       time.Duration           // 0: no cap
	resultsEvery time.Duration           // keepResults' round
	stopGrace    time.Duration           // settled
	prober       ClusterProber           // nil: ProbeClusters is unavailable

	copied     sync.Map        // artifact ID -> struct{}: its .falcon/experiment.json exists
	knownUsers sync.Map        // user_id -> time.Time registered: skip the upsert for knownUserTTL
	refused    *refusallog.Log // calls refused before authentication, for the audit log
}

var (
	_ falconv1.ExperimentServiceServer = (*Server)(nil)
	_ falconv1.JobServiceServer        = (*Server)(nil)
	_ falconv1.ArtifactServiceServer   = (*Server)(nil)
	_ falconv1.ClusterServiceServer    = (*Server)(nil)
	_ falconv1.UserServiceServer       = (*Server)(nil)
	_ falconv1.AuditServiceServer      = (*Server)(nil)
)

// Option configures a Server.
type Option func(*Server)

// WithAuthenticator sets how callers are identified (default: the local OS user).
func WithAuthenticator(a auth.Authenticator) Option { return func(s *Server) { s.auth = a } }

// WithControllerSecret sets the secret controllers present; without it
// the internal methods are refused to every caller.
func WithControllerSecret(c *auth.ControllerSecret) Option {
	return func(s *Server) { s.controllers = c }
}

// WithAdmins sets the admins: who may abort and delete anyone's
// experiments, write the cluster registry and read the audit log.
func WithAdmins(a auth.Admins) Option { return func(s *Server) { s.admins = a } }

// WithFeed shares a change feed, e.g. with in-process controllers.
func WithFeed(f *changefeed.Feed) Option { return func(s *Server) { s.feed = f } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithClock injects the clock.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithArtifactRoot sets where artifacts live: a file:// directory for
// `falcon dev`, gs://bucket/prefix in production. An artifact's path is
// <root>/experiments/<exp_id>/artifacts/<art_id>/, unless the experiment is
// pinned to a cluster with a bucket, whose jobs write there.
func WithArtifactRoot(root blobstore.Location) Option {
	return func(s *Server) { s.artifactRoot = root }
}

// WithBlobs sets how buckets are opened (GCS client options, say); by
// default Application Default Credentials are used for gs://.
func WithBlobs(o *blobstore.Opener) Option { return func(s *Server) { s.blobs = o } }

// WithHTTPHandler serves h at pattern on the HTTP address too, beside the
// gateway (falcon dev puts its controllers' /metrics and /readyz there).
func WithHTTPHandler(pattern string, h http.Handler) Option {
	return func(s *Server) {
		if s.extra == nil {
			s.extra = map[string]http.Handler{}
		}
		s.extra[pattern] = h
	}
}

// WithLogDir sets the directory holding job logs as <dir>/<job_id>/<pod>.log.
func WithLogDir(dir string) Option { return func(s *Server) { s.logDir = dir } }

// WithLogPoll sets how often a followed log is checked for new lines.
func WithLogPoll(d time.Duration) Option { return func(s *Server) { s.logPoll = d } }

// New returns a Server over st.
func New(st store.Store, opts ...Option) *Server {
	s := &Server{
		store:   st,
		refused: refusallog.New(),
		auth:    auth.Local{P: auth.LocalUser()},
		admins:  auth.NewAdmins(),
		feed:    changefeed.New(),
		log:     slog.Default(),
		now:     func() time.Time { return time.Now().UTC() },
		// Tests that never read artifacts need not name a root.
		artifactRoot: blobstore.Location{Scheme: "file", Prefix: strings.TrimPrefix(filepath.ToSlash(filepath.Join(os.TempDir(), "falcon-artifacts")), "/") + "/"},
		logPoll:      250 * time.Millisecond,
		replicaPoll:  250 * time.Millisecond,
		resultsEvery: DefaultResultsEvery,
		stopGrace:    DefaultStopGrace,
	}
	for _, o := range opts {
		o(s)
	}
	if s.blobs == nil {
		s.blobs = blobstore.NewOpener()
	}
	s.index = artifactindex.New(st, s.blobs, s.now)
	s.metrics = metricsync.New(st, resultSources{s})
	return s
}

// Feed returns the change feed the server publishes to.
func (s *Server) Feed() *changefeed.Feed { return s.feed }

// MaxRequestBytes bounds one request: a gRPC message, or an HTTP body at the
// gateway. It is far above validation.MaxConfigBytes (1 MiB), so an
// oversized config reaches validation and is refused by name (config),
// never by the transport as ResourceExhausted; JSON may escape a config
// to several times its size, hence the margin.
const MaxRequestBytes = 16 << 20

// GRPCServer adds every service and the interceptors to a new gRPC server.
func (s *Server) GRPCServer(extra ...grpc.ServerOption) *grpc.Server {
	opts := append(s.observeInterceptors(),
		grpc.ChainUnaryInterceptor(s.unaryInterceptor),
		grpc.ChainStreamInterceptor(s.streamInterceptors()...),
		grpc.MaxRecvMsgSize(MaxRequestBytes))
	g := grpc.NewServer(append(opts, extra...)...)
	falconv1.RegisterExperimentServiceServer(g, s)
	falconv1.RegisterJobServiceServer(g, s)
	falconv1.RegisterArtifactServiceServer(g, s)
	falconv1.RegisterClusterServiceServer(g, s)
	falconv1.RegisterUserServiceServer(g, s)
	falconv1.RegisterAuditServiceServer(g, s)
	falconv1.RegisterAnalysisServiceServer(g, s)
	if s.grpcMetrics != nil {
		// Every method appears in the metrics at zero, so dashboards and
		// alerts see a rate of 0 rather than no series.
		s.grpcMetrics.InitializeMetrics(g)
	}
	return g
}

// authenticate identifies the caller: a call carrying the controller
// secret is a controller (or refused, if the secret is wrong); any other
// call is judged by the authenticator. Refusals are logged with their
// detail, never with the credential.
func (s *Server) authenticate(ctx context.Context, method string) (auth.Principal, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var (
		p   auth.Principal
		err error
	)
	if vals := md.Get(auth.ControllerTokenKey); len(vals) > 0 {
		if s.controllers != nil && s.controllers.Match(vals[0]) {
			p = auth.Controller
		} else {
			err = &auth.RefusedError{Reason: "invalid controller token"}
		}
	} else {
		p, err = s.auth.Authenticate(ctx, md)
	}
	if err != nil {
		attrs := []any{"method", method, "from", caller(ctx, md), "reason", err.Error()}
		var re *auth.RefusedError
		if errors.As(err, &re) && re.Detail != nil {
			attrs = append(attrs, "detail", re.Detail.Error())
		}
		s.log.Warn("request refused: not authenticated", attrs...)
		s.noteRefused(ctx, md, method, err)
		return auth.Principal{}, err
	}
	return p, nil
}

// isAdmin reports whether p is an admin: one of the configured admins or,
// on a server without authentication (falcon dev, falcon server --auth
// none), its one user. Such a server attributes every call to the person
// running it, so there is nobody else to keep out, and that person needs
// the admin's calls to register clusters.
func (s *Server) isAdmin(p auth.Principal) bool {
	if _, local := s.auth.(auth.Local); local && p.Kind == auth.KindUser {
		return true
	}
	return s.admins.Has(p)
}

// caller is where a call came from, for logs: the client the gateway
// forwarded for, or the gRPC peer.
func caller(ctx context.Context, md metadata.MD) string {
	if f := forwardedClient(ctx, md); f != "" {
		return f
	}
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		return pr.Addr.String()
	}
	return ""
}

// forwardedClient is the client the gateway forwarded for, or "". Only
// a call from loopback (the gateway in this process, or the exec route)
// is believed, and only the last entry of X-Forwarded-For, which the
// gateway appended: a client sets the others, and a gRPC client any.
func forwardedClient(ctx context.Context, md metadata.MD) string {
	xff := md.Get("x-forwarded-for")
	if len(xff) == 0 {
		return ""
	}
	pr, ok := peer.FromContext(ctx)
	if !ok || pr.Addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(pr.Addr.String())
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return ""
	}
	all := strings.Split(strings.Join(xff, ","), ",")
	return strings.TrimSpace(all[len(all)-1])
}

// admit runs after authentication: may p call method at all, and is p
// registered (users register themselves on their first call)?
func (s *Server) admit(ctx context.Context, p auth.Principal, method string) error {
	if err := authorize(p, s.isAdmin(p), method); err != nil {
		s.log.Warn("request refused: not allowed", "method", method, "principal", p.UserID, "reason", err.Error())
		return err
	}
	if p.IsController() {
		return nil // acts for the system; owns nothing
	}
	return s.register(ctx, p)
}

// audit records a mutating call and how it ended. A failed write is
// logged in full and does not fail the call: the caller's change (or
// refusal) has already happened.
func (s *Server) audit(ctx context.Context, p auth.Principal, method string, n *auditNote, callErr error) {
	e := store.AuditEntry{
		At: s.now(), ActorID: p.UserID, ActorEmail: p.Email, Method: method,
		TargetID: n.target, Outcome: store.AuditOK, Detail: n.detail, Source: callerHost(ctx),
	}
	if callErr != nil {
		e.Outcome = errdefs.Code(callErr).String()
		e.Detail = strings.TrimPrefix(n.detail+"; "+callErr.Error(), "; ")
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.store.AppendAudit(actx, e); err != nil {
		s.log.Error("audit write failed", "err", err, "actor", e.ActorID, "email", e.ActorEmail,
			"method", e.Method, "target", e.TargetID, "outcome", e.Outcome, "detail", e.Detail)
	}
}

// unaryInterceptor is every unary call's path: authenticate, authorize
// and register the caller, run the handler, audit mutations, and map
// domain errors to gRPC statuses (the single place that does).
func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	p, err := s.authenticate(ctx, info.FullMethod)
	if err != nil {
		return nil, errdefs.ToStatus(err)
	}
	ctx = auth.WithPrincipal(ctx, p)
	noteCaller(ctx, p)
	var note *auditNote
	if r := rules[info.FullMethod]; r.audit != nil {
		if target, record := r.audit(req); record {
			note = &auditNote{target: target}
			ctx = context.WithValue(ctx, auditKey{}, note)
		}
	}
	var resp any
	err = s.admit(ctx, p, info.FullMethod)
	if err == nil {
		resp, err = h(ctx, req)
	}
	if note != nil {
		s.audit(ctx, p, info.FullMethod, note, err)
	}
	if err != nil {
		if errdefs.Code(err) == codes.Internal {
			s.log.Error("internal error", "method", info.FullMethod, "err", err)
		}
		return nil, errdefs.ToStatus(err)
	}
	return resp, nil
}

type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w wrappedStream) Context() context.Context { return w.ctx }

func (s *Server) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	p, err := s.authenticate(ss.Context(), info.FullMethod)
	if err != nil {
		return errdefs.ToStatus(err)
	}
	ctx := auth.WithPrincipal(ss.Context(), p)
	noteCaller(ctx, p)
	if err := s.admit(ctx, p, info.FullMethod); err != nil {
		return errdefs.ToStatus(err)
	}
	return errdefs.ToStatus(h(srv, wrappedStream{ss, ctx}))
}

func (s *Server) principal(ctx context.Context) (auth.Principal, error) {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return auth.Principal{}, errdefs.ErrUnauthenticated
	}
	return p, nil
}

// changed tells watchers what was written. Callers name what they wrote;
// a call with nothing named (clusters) only wakes them.
func (s *Server) changed(changes ...changefeed.Change) { s.feed.Publish(changes...) }

func expChange(id string) changefeed.Change {
	return changefeed.Change{Kind: "experiment", ID: id, ExpID: id}
}

// expWritten is the change of an experiment that a write left in status,
// marked Ended when that status is terminal: the server then reads its
// results one last time (keepResults).
func expWritten(id string, status lifecycle.Status) changefeed.Change {
	c := expChange(id)
	c.Ended = lifecycle.ExperimentMachine.IsTerminal(status)
	return c
}

// derived marks c as following from changes already on the feed (see
// falconv1.Change.derived): the expController's own writes.
func derived(c changefeed.Change) changefeed.Change {
	c.Derived = true
	return c
}

func jobChange(j *store.Job) changefeed.Change {
	return changefeed.Change{Kind: "job", ID: j.ID, ExpID: j.ExpID}
}

// writtenBy stamps c with the name the caller gave itself on the call
// (falconv1.WriterKey), so the caller can skip its echo.
func writtenBy(ctx context.Context, c changefeed.Change) changefeed.Change {
	md, _ := metadata.FromIncomingContext(ctx)
	if vals := md.Get(falconv1.WriterKey); len(vals) > 0 {
		c.Writer = vals[0]
	}
	return c
}

// artChange is an artifact's change: always the expController's, so
// derived.
func artChange(a *store.Artifact) changefeed.Change {
	return derived(changefeed.Change{Kind: "artifact", ID: a.ID, ExpID: a.ExpID})
}
