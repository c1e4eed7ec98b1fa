package apiserver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
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

// execHandler serves the exec route and hands everything else to next. It
// relays between the WebSocket and ExecExp over the gateway's connection,
// so the caller goes through the same interceptors as any call
// (authentication, access rules, registration) and the session is the
// gRPC handler's: one implementation, audited once. The upgrade request's
// credentials (Authorization, the Access header or cookie) travel with
// that call as the gateway's would. Browsers send cookies with a WebSocket
// from any page, so an upgrade whose Origin is another host is refused
// (gorilla's default): another site cannot exec with a user's cookie.
func execHandler(conn *grpc.ClientConn, next http.Handler) http.Handler {
	client := falconv1.NewExperimentServiceClient(conn)
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
		ctx, cancel := context.WithCancel(forwardedFor(r))
		defer cancel()
		relayExec(ctx, cancel, client, ws, id)
	})
}

// relayExec copies messages both ways until the gRPC stream ends.
func relayExec(ctx context.Context, cancel context.CancelFunc, client falconv1.ExperimentServiceClient, ws *websocket.Conn, id string) {
	var wmu sync.Mutex
	fail := func(err error) {
		wmu.Lock()
		defer wmu.Unlock()
		st, _ := status.FromError(errdefs.ToStatus(err))
		var b strings.Builder
		writeStreamError(&b, st.Err())
		_ = ws.WriteMessage(websocket.TextMessage, []byte(strings.TrimSpace(b.String())))
		_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	}
	stream, err := client.ExecExp(ctx)
	if err != nil {
		fail(err)
		return
	}
	go func() {
		for {
			typ, data, err := ws.ReadMessage()
			if err != nil {
				// The client went away (or closed): nothing more comes,
				// and nobody reads the output.
				cancel()
				return
			}
			req := &falconv1.ExecRequest{}
			if typ != websocket.BinaryMessage {
				err = errdefs.Invalid("message", "send binary messages holding ExecRequest (subprotocol %s)", ExecSubprotocol)
			} else if uerr := proto.Unmarshal(data, req); uerr != nil {
				err = errdefs.Invalid("message", "not an ExecRequest: %v", uerr)
			} else if st := req.GetStart(); st != nil {
				if st.ExpId == "" {
					st.ExpId = id
				} else if st.ExpId != id {
					err = errdefs.Invalid("start.exp_id", "%q differs from the experiment of the URL, %s", st.ExpId, id)
				}
			}
			if err != nil {
				fail(err)
				cancel()
				return
			}
			if err := stream.Send(req); err != nil {
				return // the stream has ended; Recv below says how
			}
		}
	}()
	var out []byte // one message, reused
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			wmu.Lock()
			_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
			wmu.Unlock()
			return
		}
		if err != nil {
			if status.Code(err) == codes.Canceled && ctx.Err() != nil {
				return
			}
			fail(err)
			return
		}
		out, err = proto.MarshalOptions{}.MarshalAppend(out[:0], resp)
		if err != nil {
			fail(err)
			return
		}
		wmu.Lock()
		err = ws.WriteMessage(websocket.BinaryMessage, out)
		wmu.Unlock()
		if err != nil {
			return
		}
	}
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
