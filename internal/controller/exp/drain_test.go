package exp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	expctl "github.com/falconhq/falcon/internal/controller/exp"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// heldConn holds the first call to method until released, so a test can
// stop the controller with a cycle in flight.
type heldConn struct {
	grpc.ClientConnInterface
	method  string
	entered chan struct{}
	release chan struct{}
	once    bool
}

func (h *heldConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if method == h.method && !h.once {
		h.once = true
		close(h.entered)
		<-h.release
	}
	return h.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

func TestShutdownDrainsTheCycleInFlight(t *testing.T) {
	tests := []struct {
		name        string
		drainFor    time.Duration // Shutdown's bound
		releaseLate bool          // the held call returns only after Shutdown gave up
		wantErr     error
		wantStatus  string
	}{
		{"the cycle in flight finishes its writes", time.Minute, false, nil, "Succeeded"},
		{"a drain that times out leaves the cut to the caller", time.Millisecond, true, context.DeadlineExceeded, "Created"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := apitest.Start(t, map[string]string{"local": "local"})
			exp := env.Create(t, "drain", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
			j := exp.GetJobs()[0].GetId()
			move(t, env, j, "Pending", "Running", "", "")
			move(t, env, j, "Running", "Succeeded", "", "")

			conn := &heldConn{ClientConnInterface: env.Conn, method: falconv1.ExperimentService_UpdateExpStatuses_FullMethodName,
				entered: make(chan struct{}), release: make(chan struct{})}
			c := expctl.New(conn, expctl.WithInterval(time.Hour))
			ctx, cut := context.WithCancel(context.Background())
			defer cut()
			ran := make(chan error, 1)
			go func() { ran <- c.Run(ctx) }()
			<-conn.entered // a cycle is writing the experiment's status

			sctx, cancel := context.WithTimeout(context.Background(), tt.drainFor)
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- c.Shutdown(sctx) }()
			if tt.releaseLate {
				if err := <-shut; !errors.Is(err, tt.wantErr) {
					t.Fatalf("Shutdown = %v, want %v", err, tt.wantErr)
				}
				cut() // the caller's cut: the held write goes out cancelled
				close(conn.release)
			} else {
				select {
				case err := <-shut:
					t.Fatalf("Shutdown returned %v with the cycle still in flight", err)
				default:
				}
				close(conn.release)
				if err := <-shut; err != nil {
					t.Fatalf("Shutdown = %v, want nil", err)
				}
			}
			if err := <-ran; err != nil {
				t.Fatalf("Run = %v", err)
			}
			if got := env.Exp(t, exp.GetId()); got.GetStatus() != tt.wantStatus {
				t.Fatalf("exp %s after the drain, want %s", got.GetStatus(), tt.wantStatus)
			}
		})
	}
}
