package apiserver

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
)

// WithMetrics exports falcon_jobs (jobs in flight by cluster, status and
// reason, when the store can count them) and the gRPC server's metrics (grpc_server_started_total,
// grpc_server_handled_total by method and code, and
// grpc_server_handling_seconds) on reg. HTTP callers are counted too: the
// gateway reaches the services through the gRPC server.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(s *Server) {
		m := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
			grpcprom.WithHistogramBuckets([]float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30})))
		reg.MustRegister(m)
		s.grpcMetrics = m
		if c, ok := s.store.(liveJobCounter); ok {
			reg.MustRegister(newJobsCollector(c))
		}
	}
}

// WithTLS serves the gRPC port and the HTTP gateway over TLS with cfg
// (whose GetCertificate may reload the certificate). The gateway's own
// connection to the gRPC services stays on a loopback listener inside the
// process.
func WithTLS(cfg *tls.Config) Option { return func(s *Server) { s.tls = cfg } }

// observeInterceptors come first in the chain, so they see every call,
// refused ones included, with the code its caller gets.
func (s *Server) observeInterceptors() []grpc.ServerOption {
	unary := []grpc.UnaryServerInterceptor{s.logUnary}
	if s.grpcMetrics != nil {
		unary = append(unary, s.grpcMetrics.UnaryServerInterceptor())
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...)}
}

// streamInterceptors are every stream's, outermost first: the request log,
// the metrics, then authentication and admission. The gRPC server and the
// exec WebSocket (which runs its sessions in this process) share them, so
// a session is treated the same whichever way it came.
func (s *Server) streamInterceptors() []grpc.StreamServerInterceptor {
	stream := []grpc.StreamServerInterceptor{s.logStream}
	if s.grpcMetrics != nil {
		stream = append(stream, s.grpcMetrics.StreamServerInterceptor())
	}
	return append(stream, s.streamInterceptor)
}

// chainStream runs h behind interceptors, as grpc.ChainStreamInterceptor
// would.
func chainStream(interceptors []grpc.StreamServerInterceptor, info *grpc.StreamServerInfo, h grpc.StreamHandler) grpc.StreamHandler {
	for i := len(interceptors) - 1; i >= 0; i-- {
		ic, next := interceptors[i], h
		h = func(srv any, ss grpc.ServerStream) error { return ic(srv, ss, info, next) }
	}
	return h
}

// callInfo is filled in by the authenticating interceptor further down the
// chain, so the request log can say who called.
type callInfo struct{ who string }

type callInfoKey struct{}

// noteCaller records p for the request log.
func noteCaller(ctx context.Context, p auth.Principal) {
	if ci, ok := ctx.Value(callInfoKey{}).(*callInfo); ok {
		if p.IsController() {
			ci.who = "controller"
		} else {
			ci.who = p.Email
		}
	}
}

func (s *Server) logUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ci := &callInfo{}
	start := time.Now()
	resp, err := h(context.WithValue(ctx, callInfoKey{}, ci), req)
	s.logRequest(ctx, info.FullMethod, ci, start, err)
	return resp, err
}

func (s *Server) logStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ci := &callInfo{}
	start := time.Now()
	err := h(srv, wrappedStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), callInfoKey{}, ci)})
	s.logRequest(ss.Context(), info.FullMethod, ci, start, err)
	return err
}

// logRequest writes one line per call: method, caller, code and duration.
// Controllers' successful calls, which come several times a second, are
// logged at debug level; failures the server caused at error level.
func (s *Server) logRequest(ctx context.Context, method string, ci *callInfo, start time.Time, err error) {
	code := status.Code(err)
	if err != nil {
		if st, ok := status.FromError(err); !ok || st.Code() == codes.Unknown {
			code = errdefs.Code(err)
		}
	}
	level := slog.LevelInfo
	switch {
	case code == codes.Internal || code == codes.Unavailable || code == codes.DataLoss:
		level = slog.LevelError
	case code == codes.OK && ci.who == "controller":
		level = slog.LevelDebug
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	md, _ := metadata.FromIncomingContext(ctx)
	s.log.LogAttrs(ctx, level, "request",
		slog.String("method", method),
		slog.String("caller", ci.who),
		slog.String("from", caller(ctx, md)),
		slog.String("code", code.String()),
		slog.Duration("duration", time.Since(start)))
}

// liveJobCounter is the store's count of jobs in flight; the SQL store
// has it.
type liveJobCounter interface {
	CountLiveJobs(ctx context.Context) ([]store.JobCount, error)
}

// jobsCollector exports falcon_jobs from the store at each scrape, so any
// replica of the API server reports the same numbers and nothing has to
// be kept in step with the database.
type jobsCollector struct {
	s    liveJobCounter
	desc *prometheus.Desc
	up   *prometheus.Desc
}

func newJobsCollector(s liveJobCounter) *jobsCollector {
	return &jobsCollector{s: s,
		desc: prometheus.NewDesc("falcon_jobs", "Jobs that have not ended, by cluster, status (Pending, Running, Aborting) and reason (Queued, Provisioning...), read from the database at each scrape.",
			[]string{"cluster", "status", "reason"}, nil),
		up: prometheus.NewDesc("falcon_jobs_scrape_ok", "1 if falcon_jobs could be read from the database at this scrape.", nil, nil),
	}
}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.up }

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.s.CountLiveJobs(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.N), n.Cluster, n.Status, n.Reason)
	}
}
