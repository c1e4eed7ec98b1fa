package apiserver

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/execwire"
)

// ExecSubprotocol is the WebSocket subprotocol of the exec route,
// GET /v1/experiments/{id}/exec with an Upgrade: each binary message is one
// ExecRequest (client to server) or ExecResponse (server to client) in
// protobuf's wire form, the same messages as ExecExp over gRPC. A call that
// fails ends with one text message, the error as the gateway writes a
// failed stream's: {"error": {"code": ..., "message": ...}}; then the
// server closes the connection.
const ExecSubprotocol = "v1.exec.falcon.dev"

// ExecPathSuffix ends the exec route's path.
const ExecPathSuffix = "/exec"

// execBuffer is the size of a WebSocket read and write buffer.
const execBuffer = 64 << 10

// ExecSessions runs one exec session for an upgraded WebSocket of the
// exec route (id is the URL's experiment).
type ExecSessions func(ws *websocket.Conn, r *http.Request, id string)

// execHandler serves the exec route and hands everything else to next.
// Browsers send cookies with a WebSocket from any page, so an upgrade
// whose Origin is another host is refused (gorilla's default): another
// site cannot exec with a user's cookie.
func execHandler(sessions ExecSessions, next http.Handler) http.Handler {
	up := websocket.Upgrader{ReadBufferSize: execBuffer, WriteBufferSize: execBuffer, Subprotocols: []string{ExecSubprotocol}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := execPath(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if !websocket.IsWebSocketUpgrade(r) {
			writeFileError(w, r, errdefs.Invalid("Upgrade", "%s%s%s is a WebSocket endpoint (subprotocol %s); ExecExp is also served over gRPC", FilePathPrefix, id, ExecPathSuffix, ExecSubprotocol))
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return // the upgrader has answered
		}
		defer ws.Close()
		ws.SetReadLimit(MaxRequestBytes)
		sessions(ws, r, id)
	})
}

// serveExecWS runs a WebSocket's exec session in this process: ExecExp
// behind the same stream interceptors as a gRPC call (request log,
// metrics, authentication from the upgrade request's Authorization,
// Access header or cookie, admission), one implementation audited once.
// The session is not relayed through the server's own gRPC port, which
// cost every byte a protobuf encoding, an HTTP/2 frame and a loopback
// copy more than the WebSocket itself.
func (s *Server) serveExecWS(ws *websocket.Conn, r *http.Request, id string) {
	md, _ := metadata.FromOutgoingContext(forwardedFor(r))
	ctx, cancel := context.WithCancel(metadata.NewIncomingContext(r.Context(), md))
	defer cancel()
	if addr, err := net.ResolveTCPAddr("tcp", r.RemoteAddr); err == nil {
		ctx = peer.NewContext(ctx, &peer.Peer{Addr: addr})
	}
	st := &wsExecStream{ctx: ctx, cancel: cancel, ws: ws, id: id}
	info := &grpc.StreamServerInfo{FullMethod: falconv1.ExperimentService_ExecExp_FullMethodName, IsClientStream: true, IsServerStream: true}
	h := chainStream(s.streamInterceptors(), info, func(_ any, ss grpc.ServerStream) error {
		return s.ExecExp(&grpc.GenericServerStream[falconv1.ExecRequest, falconv1.ExecResponse]{ServerStream: ss})
	})
	if err := h(s, st); err != nil {
		if st.gone.Load() {
			return // the client went away: nobody reads an error
		}
		st.fail(err)
		return
	}
	st.wmu.Lock()
	_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	st.wmu.Unlock()
}

// wsExecStream is a WebSocket seen as ExecExp's server stream: each
// binary message one ExecRequest in, one ExecResponse out.
type wsExecStream struct {
	ctx    context.Context
	cancel context.CancelFunc
	ws     *websocket.Conn
	id     string
	wmu    sync.Mutex
	out    []byte       // one message, reused
	in     bytes.Buffer // one message, reused
	gone   atomic.Bool
}

func (w *wsExecStream) Context() context.Context     { return w.ctx }
func (w *wsExecStream) SetHeader(metadata.MD) error  { return nil }
func (w *wsExecStream) SendHeader(metadata.MD) error { return nil }
func (w *wsExecStream) SetTrailer(metadata.MD)       {}

// RecvMsg reads the next request. The first (start) names the URL's
// experiment, or none, which means it.
func (w *wsExecStream) RecvMsg(m any) error {
	typ, rd, err := w.ws.NextReader()
	if err == nil {
		// One buffer for every message: stdin arrives a megabyte at a
		// time, and proto.Unmarshal copies what it keeps.
		w.in.Reset()
		_, err = w.in.ReadFrom(rd)
	}
	data := w.in.Bytes()
	if err != nil {
		// The client closed or went away: nothing more comes, and nobody
		// reads the output, so the session stops.
		w.gone.Store(!websocket.IsCloseError(err, websocket.CloseNormalClosure))
		w.cancel()
		if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			return io.EOF
		}
		return status.Error(codes.Canceled, "the client closed the exec session")
	}
	req, ok := m.(*falconv1.ExecRequest)
	if !ok {
		return status.Errorf(codes.Internal, "exec stream: cannot receive %T", m)
	}
	if typ != websocket.BinaryMessage {
		return errdefs.Invalid("message", "send binary messages holding ExecRequest (subprotocol %s)", ExecSubprotocol)
	}
	if num, v, ok := execwire.Bytes(data); ok && num == execwire.Stdin {
		// Stdin is most of what an upload sends: its bytes stay where
		// they were read, valid until the next RecvMsg, which ExecExp
		// calls only once they are in the command's stdin (execSession).
		req.Msg = &falconv1.ExecRequest_Stdin{Stdin: v}
		return nil
	}
	if err := proto.Unmarshal(data, req); err != nil {
		return errdefs.Invalid("message", "not an ExecRequest: %v", err)
	}
	if st := req.GetStart(); st != nil {
		if st.ExpId == "" {
			st.ExpId = w.id
		} else if st.ExpId != w.id {
			return errdefs.Invalid("start.exp_id", "%q differs from the experiment of the URL, %s", st.ExpId, w.id)
		}
	}
	return nil
}

// SendMsg writes one response.
func (w *wsExecStream) SendMsg(m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "exec stream: cannot send %T", m)
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()
	var err error
	if num, p, ok := outputOf(msg); ok {
		// Output is most of what a session sends: its header, then its
		// bytes straight into the socket's buffer, with no marshalled
		// copy between.
		err = w.writeBytes(num, p)
	} else if w.out, err = (proto.MarshalOptions{}).MarshalAppend(w.out[:0], msg); err != nil {
		return err
	} else {
		err = w.ws.WriteMessage(websocket.BinaryMessage, w.out)
	}
	if err != nil {
		w.gone.Store(true)
		w.cancel()
		return status.Error(codes.Canceled, "the client went away")
	}
	return nil
}

// outputOf is the field and bytes of a reply that carries output.
func outputOf(m proto.Message) (protowire.Number, []byte, bool) {
	r, _ := m.(*falconv1.ExecResponse)
	switch o := r.GetMsg().(type) {
	case *falconv1.ExecResponse_Stdout:
		return execwire.Stdout, o.Stdout, true
	case *falconv1.ExecResponse_Stderr:
		return execwire.Stderr, o.Stderr, true
	}
	return 0, nil, false
}

// writeBytes writes one message of field num holding p (under wmu).
func (w *wsExecStream) writeBytes(num protowire.Number, p []byte) error {
	mw, err := w.ws.NextWriter(websocket.BinaryMessage)
	if err != nil {
		return err
	}
	w.out, err = execwire.Write(mw, w.out, num, p)
	return err
}

// fail ends the session with the error as the gateway writes a failed
// stream's, then closes.
func (w *wsExecStream) fail(err error) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	st, _ := status.FromError(errdefs.ToStatus(err))
	var b strings.Builder
	writeStreamError(&b, st.Err())
	_ = w.ws.WriteMessage(websocket.TextMessage, []byte(strings.TrimSpace(b.String())))
	_ = w.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
}

// execPath recognises GET /v1/experiments/{id}/exec.
func execPath(r *http.Request) (string, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, FilePathPrefix)
	id, isExec := strings.CutSuffix(rest, ExecPathSuffix)
	if !ok || !isExec || id == "" || strings.Contains(id, "/") || r.Method != http.MethodGet {
		return "", false
	}
	return id, true
}

// forwardedFor is forwarded(r) naming the client as the gateway does
// (x-forwarded-for), so the audit log records where a session came from.
func forwardedFor(r *http.Request) context.Context {
	ctx := forwarded(r)
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if fwd := r.Header.Get("X-Forwarded-For"); fwd != "" {
		host = fwd + ", " + host
	}
	return metadata.AppendToOutgoingContext(ctx, "x-forwarded-for", host)
}
