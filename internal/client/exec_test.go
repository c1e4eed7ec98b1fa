package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/client"
)

// startedGate is a reader that notes whether it was read before the
// session's Started arrived.
type startedGate struct {
	r       io.Reader
	started atomic.Bool
	early   atomic.Bool
	read    chan struct{}
	once    atomic.Bool
}

func (g *startedGate) Read(p []byte) (int, error) {
	if !g.started.Load() {
		g.early.Store(true)
	}
	if g.once.CompareAndSwap(false, true) {
		close(g.read)
	}
	return g.r.Read(p)
}

// Exec sends no stdin before the server has said the command starts: a
// byte sent earlier waits in the connection while the server looks the
// rank up, and a cut connection would leave the server to start the
// command after the caller has moved on.
func TestExecStdinWaitsForStarted(t *testing.T) {
	gate := &startedGate{r: strings.NewReader("the input"), read: make(chan struct{})}
	got := make(chan string, 1)
	up := websocket.Upgrader{Subprotocols: []string{client.ExecSubprotocol}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		read := func() *falconv1.ExecRequest {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return nil
			}
			m := &falconv1.ExecRequest{}
			if proto.Unmarshal(b, m) != nil {
				return nil
			}
			return m
		}
		send := func(m *falconv1.ExecResponse) {
			b, _ := proto.Marshal(m)
			_ = ws.WriteMessage(websocket.BinaryMessage, b)
		}
		if read().GetStart() == nil {
			got <- "no start"
			return
		}
		// The rank is being looked up: a client that sends stdin at once
		// has read it well within 200 ms.
		select {
		case <-gate.read:
		case <-time.After(200 * time.Millisecond):
		}
		gate.started.Store(true)
		send(&falconv1.ExecResponse{Msg: &falconv1.ExecResponse_Started{Started: &falconv1.ExecStarted{JobId: "job-1"}}})
		var in strings.Builder
		for m := read(); m != nil && !m.GetCloseStdin(); m = read() {
			in.Write(m.GetStdin())
		}
		got <- in.String()
		send(&falconv1.ExecResponse{Msg: &falconv1.ExecResponse_Exit{Exit: &falconv1.ExecExit{Code: 0}}})
		_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exit, err := c.Exec(ctx, &falconv1.ExecStart{ExpId: "exp-0000000001", Command: []string{"cat"}, Stdin: true},
		client.ExecIO{Stdin: gate, Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if exit.GetCode() != 0 {
		t.Errorf("exit %d", exit.GetCode())
	}
	if in := <-got; in != "the input" {
		t.Errorf("the server read stdin %q; want %q", in, "the input")
	}
	if gate.early.Load() {
		t.Error("stdin was read before the session's Started")
	}
}
