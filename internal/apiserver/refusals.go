package apiserver

import (
	"context"
	"errors"
	"net"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/errdefs"
)

// refusalWriteTimeout bounds one flush of the refusal log.
const refusalWriteTimeout = 30 * time.Second

// noteRefused counts a call refused before authentication in the refusal
// log, which the audit log receives a minute at a time: anyone can make
// such calls, as many as they like, so they get no row each. When the
// call opens a new minute, what ended is written now and the new minute
// once it ends, so quiet minutes cost nothing.
func (s *Server) noteRefused(ctx context.Context, md metadata.MD, method string, err error) {
	if !errors.Is(err, errdefs.ErrUnauthenticated) {
		return // not a refusal: the server could not decide (a dependency failed)
	}
	reason := errdefs.Code(err).String()
	var re *auth.RefusedError
	if errors.As(err, &re) {
		reason = re.Class()
	}
	now := s.now()
	if !s.refused.Add(now, sourceHost(ctx, md), reason, method) {
		return
	}
	go s.flushRefusals(ctx, false)
	if due := s.refused.Due(); !due.IsZero() {
		// A second past the minute, so the clock has surely passed it.
		time.AfterFunc(due.Sub(now)+time.Second, func() { s.flushRefusals(ctx, false) })
	}
}

// FlushAudit writes what the server holds for the audit log: the counts
// of calls refused before authentication in the current minute. A
// stopping server calls it once it serves no more, before it closes the
// store, so the last minute is not lost.
func (s *Server) FlushAudit(ctx context.Context) { s.flushRefusals(ctx, true) }

// flushRefusals writes the counts of refused calls whose minute has
// ended; with all, the current minute's too. A failed write is logged in
// full, as every lost audit entry is.
func (s *Server) flushRefusals(ctx context.Context, all bool) {
	entries := s.refused.Take(s.now(), all)
	if len(entries) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refusalWriteTimeout)
	defer cancel()
	for _, e := range entries {
		if err := s.store.AppendAudit(wctx, e); err != nil {
			s.log.Error("audit write failed", "err", err, "method", e.Method, "source", e.Source,
				"outcome", e.Outcome, "count", e.Count, "at", e.At, "detail", e.Detail)
		}
	}
}

// callerHost is sourceHost for the call in ctx.
func callerHost(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return sourceHost(ctx, md)
}

// sourceHost is where a call came from, for the audit log: the client the
// gateway forwarded for, or the gRPC peer's host without its port (a
// client's every connection has a port of its own).
func sourceHost(ctx context.Context, md metadata.MD) string {
	if f := forwardedClient(ctx, md); f != "" {
		return f
	}
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		a := pr.Addr.String()
		if host, _, err := net.SplitHostPort(a); err == nil {
			return host
		}
		return a
	}
	return ""
}
