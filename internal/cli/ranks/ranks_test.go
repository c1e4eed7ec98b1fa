package ranks

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
)

func TestOf(t *testing.T) {
	job := func(role string, replica, slices int32) *falconv1.Job {
		return &falconv1.Job{Id: "job-" + role, Role: role, TaskSpec: &falconv1.TaskSpec{Replica: replica, Slices: slices}}
	}
	one := &falconv1.Experiment{Id: "exp-1", Jobs: []*falconv1.Job{job("main", 4, 0)}}
	two := &falconv1.Experiment{Id: "exp-2", Jobs: []*falconv1.Job{job("server", 2, 3), job("client", 1, 0)}}
	for _, tt := range []struct {
		name    string
		exp     *falconv1.Experiment
		role    string
		job     string
		n       int32
		wantErr string
	}{
		{"the only role", one, "", "job-main", 4, ""},
		{"named", one, "main", "job-main", 4, ""},
		{"slices times replica", two, "server", "job-server", 6, ""},
		{"several roles, none named", two, "", "", 0, "--role: experiment exp-2 has several roles (server, client): name one"},
		{"no such role", one, "worker", "", 0, `--role: experiment exp-1 has no role "worker"; roles: main`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j, n, err := Of(tt.exp, tt.role)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v; want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || j.GetId() != tt.job || n != tt.n {
				t.Errorf("Of = %s, %d, %v; want %s, %d", j.GetId(), n, err, tt.job, tt.n)
			}
		})
	}
}

func TestErr(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		code codes.Code
		msg  string
	}{
		{"a status keeps its code, not its frame", status.Error(codes.Unavailable, "session broke"), codes.Unavailable, "rank 2: session broke"},
		{"a field error keeps its code", errdefs.Invalid("--role", "no such role"), codes.InvalidArgument, "rank 2: --role: no such role"},
		{"a plain error", errors.New("disk full"), codes.Internal, "rank 2: disk full"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Err("rank 2", tt.err)
			if got := errdefs.Code(err); got != tt.code {
				t.Errorf("code %v, want %v", got, tt.code)
			}
			msg := err.Error()
			if st, ok := status.FromError(err); ok {
				msg = st.Message()
			}
			if msg != tt.msg {
				t.Errorf("message %q, want %q", msg, tt.msg)
			}
		})
	}
}
