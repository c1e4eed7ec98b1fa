package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/web"
)

// JSONMarshaler is how the gateway (and the CLI) write JSON: proto field
// names (exp_type, next_page_token) and every field present, so scripts can
// rely on .reason existing even when it is empty. It reads request bodies
// strictly: unknown fields and anything after the body's one JSON value are
// refused.
func JSONMarshaler() runtime.Marshaler {
	return wholeBodyJSON{&runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}}
}

// wholeBodyJSON is runtime.JSONPb whose decoder insists that a body is one
// JSON value. JSONPb's reads the first value and the handler discards the
// rest, so `{"experiment": ...} {"validate_only": true}` would be created
// with its second half silently dropped. (Found by FuzzDecodeRequestBody.)
type wholeBodyJSON struct{ *runtime.JSONPb }

func (m wholeBodyJSON) NewDecoder(r io.Reader) runtime.Decoder {
	d := m.JSONPb.NewDecoder(r).(runtime.DecoderWrapper)
	return runtime.DecoderFunc(func(v any) error {
		// An empty body stays io.EOF, which the handlers take as an empty
		// request.
		if err := d.Decode(v); err != nil {
			return err
		}
		if _, err := d.Token(); !errors.Is(err, io.EOF) {
			return errdefs.Invalid("request body", "holds more than one JSON value; send exactly one object")
		}
		return nil
	})
}

// forwardHeader decides which HTTP headers reach the gRPC services as
// metadata: grpc-gateway's defaults (Authorization as is, Cookie and other
// standard headers prefixed grpcgateway-) plus the token Cloudflare's edge
// sets, which the defaults would drop. Nothing else is forwarded, so no
// HTTP client can set metadata the server trusts, such as the controller
// token; that includes Grpc-Metadata-* headers, which the default matcher
// no longer maps (grpc-gateway's LegacyHeaderMatcher did).
// TestControllerTokenNeverCrossesTheGateway holds both to it.
func forwardHeader(key string) (string, bool) {
	if textproto.CanonicalMIMEHeaderKey(key) == auth.AssertionHeader {
		return strings.ToLower(auth.AssertionHeader), true
	}
	return runtime.DefaultHeaderMatcher(key)
}

// Gateway returns the HTTP handler: the JSON gateway under /v1/, the OpenAPI
// document at /openapi.json and a health check at /healthz. It reaches the
// gRPC services through conn, so HTTP callers go through exactly the same
// interceptors as gRPC callers.
func Gateway(ctx context.Context, conn *grpc.ClientConn, files FileOpener, exec ExecSessions) (http.Handler, error) {
	mux := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, JSONMarshaler()),
		runtime.WithIncomingHeaderMatcher(forwardHeader))
	for _, reg := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		falconv1.RegisterExperimentServiceHandler,
		falconv1.RegisterJobServiceHandler,
		falconv1.RegisterArtifactServiceHandler,
		falconv1.RegisterClusterServiceHandler,
		falconv1.RegisterUserServiceHandler,
		falconv1.RegisterAuditServiceHandler,
		falconv1.RegisterAnalysisServiceHandler,
	} {
		if err := reg(ctx, mux, conn); err != nil {
			return nil, err
		}
	}
	h := http.NewServeMux()
	h.Handle("/v1/", limitBody(mux))
	h.HandleFunc("/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(falconv1.OpenAPI)
	})
	h.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	// Raw file reads are routed before the mux, which would clean ".." and
	// "//" out of the path and redirect: the file handler must see the path
	// as sent to refuse it by name.
	// Exec is a WebSocket relayed to ExecExp (exec_http.go).
	return execHandler(exec, logsHandler(conn, fileHandler(conn, files, h))), nil
}

// gatewayRecvBytes bounds one response the gateway relays: a full page of
// experiments with configs at the validation limit.
const gatewayRecvBytes = 256 << 20

// limitBody caps request bodies at MaxRequestBytes. Without it the gateway
// would read a body of any size into memory, and a message too large for
// the gRPC server would come back as ResourceExhausted (HTTP 429, "retry
// later"). A body over the cap is bad input: the gateway stops reading and
// answers InvalidArgument (400) naming the limit.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			r.Body = &cappedBody{ReadCloser: http.MaxBytesReader(w, r.Body, MaxRequestBytes)}
		}
		next.ServeHTTP(w, r)
	})
}

// cappedBody names the limit when a body exceeds it; the gateway puts a
// read error into its InvalidArgument answer as is.
type cappedBody struct{ io.ReadCloser }

func (b *cappedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		err = errdefs.Invalid("request body", "is larger than the limit of %d bytes (%d MiB)", tooLarge.Limit, tooLarge.Limit>>20)
	}
	return n, err
}

// Running is a served API: its addresses and a way to stop it.
type Running struct {
	GRPCAddr string
	HTTPAddr string
	errc     chan error
}

// Wait blocks until the servers stop and returns the first serving error.
func (r *Running) Wait() error { return <-r.errc }

// Serve listens on grpcAddr and httpAddr (":0" picks a free port) and serves
// until ctx is cancelled, then stops gracefully (streams get a few seconds).
func (s *Server) Serve(ctx context.Context, grpcAddr, httpAddr string) (*Running, error) {
	gl, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		return nil, fmt.Errorf("listen gRPC on %s: %w", grpcAddr, err)
	}
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		gl.Close()
		return nil, fmt.Errorf("listen HTTP on %s: %w", httpAddr, err)
	}
	g := s.GRPCServer()
	public := gl
	gatewayAddr := gl.Addr().String()
	var il net.Listener
	if s.tls != nil {
		// gRPC clients require ALPN h2. The gRPC server sees connections
		// already decrypted, so one server serves both listeners.
		public = tls.NewListener(gl, withALPN(s.tls, "h2"))
		// The gateway reaches the services on a listener of its own on
		// loopback, in clear: it would otherwise need a certificate valid
		// for whatever address it dials. Calls on it are authenticated
		// like any other; it grants nothing the public port does not.
		if il, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			gl.Close()
			hl.Close()
			return nil, fmt.Errorf("listen for the gateway on loopback: %w", err)
		}
		gatewayAddr = il.Addr().String()
	}
	// The gateway relays whole responses: a page of experiments may carry a
	// config of up to MaxConfigBytes each, far past grpc-go's 4 MiB default.
	closeAll := func() {
		gl.Close()
		hl.Close()
		if il != nil {
			il.Close()
		}
	}
	conn, err := grpc.NewClient(gatewayAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(gatewayRecvBytes), grpc.MaxCallSendMsgSize(MaxRequestBytes)))
	if err != nil {
		closeAll()
		return nil, err
	}
	gw, err := Gateway(ctx, conn, s.openFile, s.serveExecWS)
	if err != nil {
		conn.Close()
		closeAll()
		return nil, err
	}
	root := http.NewServeMux()
	root.Handle(LoginPath, s.loginHandler())
	root.Handle("/", gw)
	// The read-only dashboard calls the services through the gateway's
	// connection, as its caller, like every HTTP route.
	root.Handle(web.Prefix, web.New(conn, forwarded, web.WithFeed(s.feed), web.WithLifetime(ctx), web.WithClock(s.now), web.WithLogger(s.log)))
	// The address falcon dev prints, opened in a browser: the dashboard.
	root.Handle("GET /{$}", http.RedirectHandler(web.Prefix, http.StatusFound))
	for pattern, h := range s.extra {
		root.Handle(pattern, h)
	}
	// File reads bypass root's path cleaning for the reason Gateway gives.
	top := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := filePath(r); ok {
			gw.ServeHTTP(w, r)
			return
		}
		root.ServeHTTP(w, r)
	})
	// The server's own complaints (failed handshakes, say) go to its log.
	hs := &http.Server{Handler: top, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	if s.tls != nil {
		hs.TLSConfig = withALPN(s.tls, "h2", "http/1.1")
	}

	r := &Running{GRPCAddr: gl.Addr().String(), HTTPAddr: hl.Addr().String(), errc: make(chan error, 1)}
	errc := make(chan error, 3)
	go func() { errc <- g.Serve(public) }()
	if il != nil {
		go func() { errc <- g.Serve(il) }()
	}
	go s.keepResults(ctx)
	if s.replicaPoll > 0 {
		go s.FollowReplicas(ctx, s.replicaPoll)
	}
	go func() {
		serve := func() error { return hs.Serve(hl) }
		if hs.TLSConfig != nil {
			serve = func() error { return hs.ServeTLS(hl, "", "") }
		}
		if err := serve(); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
			return
		}
		errc <- nil
	}()
	go func() {
		var first error
		select {
		case <-ctx.Done():
		case first = <-errc:
		}
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		done := make(chan struct{})
		go func() { g.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-sctx.Done():
			g.Stop()
		}
		conn.Close()
		// The minute of refused calls in progress; Wait returns only after
		// it is written, so the caller may close the store.
		fctx, fcancel := context.WithTimeout(context.Background(), 3*time.Second)
		s.FlushAudit(fctx)
		fcancel()
		r.errc <- first
	}()
	return r, nil
}

// withALPN is cfg offering protos in ALPN.
func withALPN(cfg *tls.Config, protos ...string) *tls.Config {
	c := cfg.Clone()
	c.NextProtos = protos
	return c
}
