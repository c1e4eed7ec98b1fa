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

func TestAll(t *testing.T) {
	job := func(role string, replica, slices int32) *falconv1.Job {
		return &falconv1.Job{Id: "job-" + role, Role: role, TaskSpec: &falconv1.TaskSpec{Replica: replica, Slices: slices}}
	}
	one := &falconv1.Experiment{Id: "exp-1", Jobs: []*falconv1.Job{job("main", 2, 0)}}
	two := &falconv1.Experiment{Id: "exp-2", Jobs: []*falconv1.Job{job("server", 1, 3), job("client", 1, 0)}}
	for _, tt := range []struct {
		name    string
		exp     *falconv1.Experiment
		role    string
		want    string
		wantErr string
	}{
		{"the only role", one, "", "main/0 main/1", ""},
		{"named", one, "main", "main/0 main/1", ""},
		{"slices times replica", two, "server", "server/0 server/1 server/2", ""},
		{"every role, by role", two, "", "client/0 server/0 server/1 server/2", ""},
		{"no such role", two, "worker", "", `--role: experiment exp-2 has no role "worker"; roles: client, server`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := All(tt.exp, tt.role)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v; want %q", err, tt.wantErr)
				}
				return
			}
			var s []string
			for _, r := range got {
				s = append(s, r.String())
			}
			if err != nil || strings.Join(s, " ") != tt.want {
				t.Errorf("All = %v, %v; want %s", s, err, tt.want)
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
