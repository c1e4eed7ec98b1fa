package apiserver

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/changefeed"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
)

// Server implements every Falcon gRPC service over one store.
type Server struct {
	falconv1.UnimplementedExperimentServiceServer
	falconv1.UnimplementedJobServiceServer
	falconv1.UnimplementedArtifactServiceServer
	falconv1.UnimplementedClusterServiceServer
	falconv1.UnimplementedUserServiceServer

	store        store.Store
	auth         auth.Authenticator
	feed         *changefeed.Feed
	log          *slog.Logger
	now          func() time.Time
	artifactRoot string
	logDir       string
	logPoll      time.Duration

	knownUsers sync.Map // user_id -> struct{}: skip the upsert after the first request
}

var (
	_ falconv1.ExperimentServiceServer = (*Server)(nil)
	_ falconv1.JobServiceServer        = (*Server)(nil)
	_ falconv1.ArtifactServiceServer   = (*Server)(nil)
	_ falconv1.ClusterServiceServer    = (*Server)(nil)
	_ falconv1.UserServiceServer       = (*Server)(nil)
)

// Option configures a Server.
type Option func(*Server)

// WithAuthenticator sets how callers are identified (default: the local OS user).
func WithAuthenticator(a auth.Authenticator) Option { return func(s *Server) { s.auth = a } }

// WithFeed shares a change feed, e.g. with in-process controllers.
func WithFeed(f *changefeed.Feed) Option { return func(s *Server) { s.feed = f } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithClock injects the clock.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithArtifactRoot sets where artifacts live: a local directory for
// `falcon dev`, gs://bucket in production. An artifact's path is
// <root>/experiments/<exp_id>/artifacts/<art_id>/.
func WithArtifactRoot(root string) Option {
	return func(s *Server) { s.artifactRoot = strings.TrimSuffix(root, "/") }
}

// WithLogDir sets the directory holding job logs as <dir>/<job_id>/<pod>.log.
func WithLogDir(dir string) Option { return func(s *Server) { s.logDir = dir } }

// WithLogPoll sets how often a followed log is checked for new lines.
func WithLogPoll(d time.Duration) Option { return func(s *Server) { s.logPoll = d } }

// New returns a Server over st.
func New(st store.Store, opts ...Option) *Server {
	s := &Server{
		store:        st,
		auth:         auth.Local{P: auth.LocalUser()},
		feed:         changefeed.New(),
		log:          slog.Default(),
		now:          func() time.Time { return time.Now().UTC() },
		artifactRoot: "experiments-root",
		logPoll:      250 * time.Millisecond,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Feed returns the change feed the server publishes to.
func (s *Server) Feed() *changefeed.Feed { return s.feed }

// Register adds every service and the interceptors to a new gRPC server.
func (s *Server) GRPCServer(extra ...grpc.ServerOption) *grpc.Server {
	opts := append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.unaryInterceptor),
		grpc.ChainStreamInterceptor(s.streamInterceptor),
		grpc.MaxRecvMsgSize(8 << 20),
	}, extra...)
	g := grpc.NewServer(opts...)
	falconv1.RegisterExperimentServiceServer(g, s)
	falconv1.RegisterJobServiceServer(g, s)
	falconv1.RegisterArtifactServiceServer(g, s)
	falconv1.RegisterClusterServiceServer(g, s)
	falconv1.RegisterUserServiceServer(g, s)
	return g
}

// authenticate identifies the caller and registers them on first sight.
func (s *Server) authenticate(ctx context.Context) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	p, err := s.auth.Authenticate(ctx, md)
	if err != nil {
		return nil, err
	}
	if _, ok := s.knownUsers.Load(p.UserID); !ok {
		if _, err := s.store.EnsureUser(ctx, &store.User{UserID: p.UserID, Email: p.Email}); err != nil {
			return nil, err
		}
		s.knownUsers.Store(p.UserID, struct{}{})
	}
	return auth.WithPrincipal(ctx, p), nil
}

// unaryInterceptor authenticates and is the single exit where domain errors
// become gRPC statuses.
func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := s.authenticate(ctx)
	if err != nil {
		return nil, errdefs.ToStatus(err)
	}
	resp, err := h(ctx, req)
	if err != nil {
		if errdefs.Code(err).String() == "Internal" {
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
	ctx, err := s.authenticate(ss.Context())
	if err != nil {
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

func (s *Server) changed() { s.feed.Publish() }
