package exec

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
)

// cooked reports whether the terminal still turns Ctrl-C into SIGINT.
func cooked(t *testing.T, fd uintptr) bool {
	t.Helper()
	st, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return st.Lflag&unix.ISIG != 0
}

// `exp exec -it` leaves the local terminal as it is while the rank is
// waited for, so that Ctrl-C ends the wait; it turns raw once the command
// starts, and is restored when the command ends.
func TestTerminalTurnsRawWhenTheCommandStarts(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close(); tty.Close() })

	waiting, start, started, exit := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	up := websocket.Upgrader{Subprotocols: []string{client.ExecSubprotocol}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		send := func(m *falconv1.ExecResponse) {
			b, _ := proto.Marshal(m)
			_ = ws.WriteMessage(websocket.BinaryMessage, b)
		}
		if _, _, err := ws.ReadMessage(); err != nil {
			return
		}
		send(&falconv1.ExecResponse{Msg: &falconv1.ExecResponse_Notice{Notice: "rank 0 does not run yet; waiting"}})
		close(waiting)
		<-start
		send(&falconv1.ExecResponse{Msg: &falconv1.ExecResponse_Started{Started: &falconv1.ExecStarted{JobId: "job-1"}}})
		close(started)
		<-exit
		send(&falconv1.ExecResponse{Msg: &falconv1.ExecResponse_Exit{Exit: &falconv1.ExecExit{Code: 0}}})
		_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	}))
	t.Cleanup(srv.Close)

	ios, _, _, errOut := iostreams.Test()
	ios.In = tty
	ios.SetStdinTTY(true)
	opts := &Options{
		IO:     ios,
		Client: func() (*client.Client, error) { return client.New(srv.URL) },
		ID:     "exp-q7odgo8q9x", Command: []string{"bash"}, Stdin: true, TTY: true,
	}
	done := make(chan error, 1)
	go func() { done <- execRun(context.Background(), opts) }()

	<-waiting
	if !cooked(t, tty.Fd()) {
		t.Error("the terminal is raw while the rank is waited for: Ctrl-C cannot end the wait")
	}
	close(start)
	<-started
	deadline := time.Now().Add(10 * time.Second)
	for cooked(t, tty.Fd()) {
		if time.Now().After(deadline) {
			t.Fatal("the terminal never turned raw once the command started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(exit)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !cooked(t, tty.Fd()) {
		t.Error("the terminal was not restored when the command ended")
	}
	if !bytes.Contains(errOut.Bytes(), []byte("waiting")) {
		t.Errorf("the wait was not said: %q", errOut.String())
	}
}
