package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/execwire"
)

// ExecSubprotocol is the exec route's WebSocket subprotocol; the server's
// (apiserver.ExecSubprotocol) is the same string.
const ExecSubprotocol = "v1.exec.falcon.dev"

// execStdinChunk is the most stdin one message carries: large enough that
// an upload of gigabytes is thousands of messages, not millions (each
// costs an encoding and a frame on both sides), far under the server's
// message limit.
const execStdinChunk = 1 << 20

// ExecSession is one ExecExp over the server's WebSocket route: Send the
// requests after start, Recv the replies. Send and Recv may be called from
// one goroutine each.
type ExecSession struct {
	ws   *websocket.Conn
	wmu  sync.Mutex
	c    *Client
	rbuf bytes.Buffer // one message read, reused
	obuf []byte       // output on its way from the socket to its writer
	hdr  []byte       // a bytes message's header, reused
}

// ExecExp opens an exec session and sends start. The session has no
// timeout; cancel ctx or Close it to end it, which ends the command.
func (c *Client) ExecExp(ctx context.Context, start *falconv1.ExecStart) (*ExecSession, error) {
	u := *c.base
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[c.base.Scheme]
	u.Path = idPath(c.base.Path+"/v1/experiments", start.GetExpId()) + "/exec"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.String(), nil)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "building request: %v", err)
	}
	if err := c.authorize(ctx, req); err != nil {
		return nil, err
	}
	d := &websocket.Dialer{
		Proxy:           http.ProxyFromEnvironment,
		Subprotocols:    []string{ExecSubprotocol},
		ReadBufferSize:  execStdinChunk,
		WriteBufferSize: execStdinChunk,
	}
	if t, ok := c.http.Transport.(*http.Transport); ok {
		d.Proxy, d.TLSClientConfig, d.NetDialContext = t.Proxy, t.TLSClientConfig, t.DialContext
	}
	ws, resp, err := d.DialContext(ctx, u.String(), req.Header)
	if err != nil {
		if resp != nil {
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if resp.StatusCode == http.StatusSwitchingProtocols {
				return nil, c.transportError(ctx, err)
			}
			if resp.Request == nil {
				resp.Request = req
			}
			return nil, decodeError(resp, body)
		}
		return nil, c.transportError(ctx, err)
	}
	// Closing the connection when ctx ends unblocks Recv.
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	s := &ExecSession{ws: ws, c: c}
	ws.SetCloseHandler(func(int, string) error { stop(); return nil })
	if err := s.Send(&falconv1.ExecRequest{Msg: &falconv1.ExecRequest_Start{Start: start}}); err != nil {
		ws.Close()
		return nil, err
	}
	return s, nil
}

// Send sends one request.
func (s *ExecSession) Send(r *falconv1.ExecRequest) error {
	b, err := proto.Marshal(r)
	if err != nil {
		return status.Errorf(codes.Internal, "encoding exec request: %v", err)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
		return status.Errorf(codes.Unavailable, "exec session to %s: %v", s.c.base, err)
	}
	return nil
}

// sendBytes sends a message of field num holding p, the header and then
// p itself into the socket's buffer: stdin is most of what an upload
// sends, and proto.Marshal would copy every byte of it once more.
func (s *ExecSession) sendBytes(num protowire.Number, p []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	w, err := s.ws.NextWriter(websocket.BinaryMessage)
	if err == nil {
		s.hdr, err = execwire.Write(w, s.hdr, num, p)
	}
	if err != nil {
		return status.Errorf(codes.Unavailable, "exec session to %s: %v", s.c.base, err)
	}
	return nil
}

// Recv returns the next reply; io.EOF once the server has closed the
// session after the exit, and the call's status when it failed.
func (s *ExecSession) Recv() (*falconv1.ExecResponse, error) { return s.recv(nil, nil) }

// recv is Recv, except that with stdout and stderr set, output goes
// straight from the socket's buffer to them, a megabyte at a time, and
// recv returns a nil reply for it: what Exec does with most of a
// session's bytes, without copying each into a message first.
func (s *ExecSession) recv(stdout, stderr io.Writer) (*falconv1.ExecResponse, error) {
	typ, rd, err := s.ws.NextReader()
	var head []byte
	if err == nil && typ == websocket.BinaryMessage && stdout != nil {
		var num protowire.Number
		var n int64
		var ok bool
		if num, n, head, ok, err = execwire.ReadHeader(rd, execwire.Output); err == nil && ok {
			w := stdout
			if num == execwire.Stderr {
				w = stderr
			}
			return nil, s.copyOutput(w, rd, n, num == execwire.Stdout)
		}
	}
	if err == nil {
		s.rbuf.Reset()
		s.rbuf.Write(head)
		_, err = s.rbuf.ReadFrom(rd)
	}
	data := s.rbuf.Bytes()
	if err != nil {
		return nil, s.broke(err)
	}
	if typ == websocket.TextMessage {
		return nil, decodeStreamError(data)
	}
	r := &falconv1.ExecResponse{}
	if err := proto.Unmarshal(data, r); err != nil {
		return nil, status.Errorf(codes.Internal, "decoding exec reply from %s: %v", s.c.base, err)
	}
	return r, nil
}

// copyOutput writes the n bytes of an output message from rd to w, and
// checks that the message ends there.
func (s *ExecSession) copyOutput(w io.Writer, rd io.Reader, n int64, stdout bool) error {
	if s.obuf == nil {
		s.obuf = make([]byte, execStdinChunk)
	}
	for n > 0 {
		k, err := io.ReadFull(rd, s.obuf[:min(n, int64(len(s.obuf)))])
		if k > 0 {
			if _, werr := w.Write(s.obuf[:k]); werr != nil {
				what := "errors"
				if stdout {
					what = "output"
				}
				return status.Errorf(codes.Aborted, "writing the command's %s: %v", what, werr)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return s.broke(err)
		}
		n -= int64(k)
	}
	if k, _ := rd.Read(s.obuf[:1]); k > 0 {
		return status.Errorf(codes.Internal, "decoding exec reply from %s: %v", s.c.base, execwire.ErrTrailing)
	}
	return nil
}

// broke is the error of a session whose socket failed: io.EOF when the
// server closed it as it should.
func (s *ExecSession) broke(err error) error {
	if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		return io.EOF
	}
	return status.Errorf(codes.Unavailable, "exec session to %s broke: %v", s.c.base, err)
}

// Close ends the session (and so the command, if it still runs).
func (s *ExecSession) Close() error { return s.ws.Close() }

// decodeStreamError reads the text message that ends a failed session:
// {"error": <google.rpc.Status>}.
func decodeStreamError(b []byte) error {
	var wrapped struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &wrapped) == nil && len(wrapped.Error) > 0 {
		if st, ok := decodeStatus(wrapped.Error); ok {
			return st.Err()
		}
	}
	return status.Errorf(codes.Unknown, "exec session: %s", b)
}

// ExecIO is where a session's streams go.
type ExecIO struct {
	// Stdin is sent as the command's stdin when start.stdin is set, from
	// the server's Started on; its end closes the command's stdin.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Resize sends each value as a terminal resize.
	Resize <-chan *falconv1.TerminalSize
	// Notice and Started, when set, hear of the server's notices and of
	// the command's start.
	Notice  func(string)
	Started func(*falconv1.ExecStarted)
}

// Exec runs start's command to its end: stdin sent, output written, and
// its exit returned. An error means the command did not run to its end
// (or was never run): the call's status.
func (c *Client) Exec(ctx context.Context, start *falconv1.ExecStart, eio ExecIO) (*falconv1.ExecExit, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.ExecExp(ctx, start)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	// Stdin waits for the server's Started: bytes sent before it wait in
	// the connection's buffers while the server looks the rank up, and a
	// connection cut then leaves the server to start the command late,
	// after the caller has given up on it and perhaps started another that
	// writes the same files (exp cp's retries).
	stdin := start.GetStdin() && eio.Stdin != nil
	if eio.Resize != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case sz, ok := <-eio.Resize:
					if !ok {
						return
					}
					_ = s.Send(&falconv1.ExecRequest{Msg: &falconv1.ExecRequest_Resize{Resize: sz}})
				}
			}
		}()
	}
	for {
		r, err := s.recv(eio.Stdout, eio.Stderr)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, status.Errorf(codes.Unavailable, "exec session to %s ended without the command's exit", c.base)
			}
			if ctx.Err() != nil {
				return nil, status.FromContextError(context.Cause(ctx)).Err()
			}
			return nil, err
		}
		switch m := r.GetMsg().(type) {
		case nil:
			// Output recv has written already (or a message of a field
			// this client does not know).
		case *falconv1.ExecResponse_Stdout:
			if _, err := eio.Stdout.Write(m.Stdout); err != nil {
				return nil, status.Errorf(codes.Aborted, "writing the command's output: %v", err)
			}
		case *falconv1.ExecResponse_Stderr:
			if _, err := eio.Stderr.Write(m.Stderr); err != nil {
				return nil, status.Errorf(codes.Aborted, "writing the command's errors: %v", err)
			}
		case *falconv1.ExecResponse_Notice:
			if eio.Notice != nil {
				eio.Notice(m.Notice)
			}
		case *falconv1.ExecResponse_Started:
			if eio.Started != nil {
				eio.Started(m.Started)
			}
			if stdin {
				stdin = false
				go s.sendStdin(ctx, eio.Stdin)
			}
		case *falconv1.ExecResponse_Exit:
			return m.Exit, nil
		}
	}
}

// sendStdin forwards in, then its end.
func (s *ExecSession) sendStdin(ctx context.Context, in io.Reader) {
	buf := make([]byte, execStdinChunk)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if s.sendBytes(execwire.Stdin, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				_ = s.Send(&falconv1.ExecRequest{Msg: &falconv1.ExecRequest_CloseStdin{CloseStdin: true}})
			}
			return
		}
	}
}
