package errdefs

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/falconhq/falcon/internal/lifecycle"
)

func TestCodeAndExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code codes.Code
		exit int
	}{
		{"field error", Invalid("name", "is required"), codes.InvalidArgument, ExitInvalid},
		{"field errors", FieldErrors{{Field: "a", Detail: "b"}}, codes.InvalidArgument, ExitInvalid},
		{"wrapped not found", fmt.Errorf("get: %w", NotFound("experiment", "exp-1")), codes.NotFound, ExitNotFound},
		{"already exists", fmt.Errorf("name taken: %w", ErrAlreadyExists), codes.AlreadyExists, ExitPrecondition},
		{"precondition", Precondition("job is Aborting"), codes.FailedPrecondition, ExitPrecondition},
		{"illegal transition", lifecycle.JobMachine.Check(lifecycle.Pending, lifecycle.Succeeded), codes.FailedPrecondition, ExitPrecondition},
		{"unauthenticated", ErrUnauthenticated, codes.Unauthenticated, ExitAuth},
		{"permission", ErrPermissionDenied, codes.PermissionDenied, ExitAuth},
		{"unavailable", ErrUnavailable, codes.Unavailable, ExitUnavailable},
		{"grpc status passes through", status.Error(codes.DeadlineExceeded, "slow"), codes.DeadlineExceeded, ExitTimeout},
		{"unknown is internal", errors.New("boom"), codes.Internal, ExitError},
		{"database refusing connections", fmt.Errorf("sqlstore: begin: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), codes.Unavailable, ExitUnavailable},
		{"connection the driver gave up", fmt.Errorf("query: %w", driver.ErrBadConn), codes.Unavailable, ExitUnavailable},
		{"connection cut mid-answer", fmt.Errorf("scan: %w", io.ErrUnexpectedEOF), codes.Unavailable, ExitUnavailable},
		{"client hung up", fmt.Errorf("list: %w", context.Canceled), codes.Canceled, ExitError},
		{"deadline", fmt.Errorf("list: %w", context.DeadlineExceeded), codes.DeadlineExceeded, ExitTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Code(tt.err); got != tt.code {
				t.Fatalf("Code = %v, want %v", got, tt.code)
			}
			if got := status.Code(ToStatus(tt.err)); got != tt.code {
				t.Fatalf("ToStatus code = %v, want %v", got, tt.code)
			}
			if got := ExitCode(tt.code); got != tt.exit {
				t.Fatalf("ExitCode = %d, want %d", got, tt.exit)
			}
		})
	}
	if ToStatus(nil) != nil {
		t.Fatal("ToStatus(nil) != nil")
	}
}

func TestFieldErrorsNameEveryField(t *testing.T) {
	var fe FieldErrors
	if fe.Err() != nil {
		t.Fatal("empty FieldErrors is an error")
	}
	fe.Add("name", "is required")
	fe.Add("role_to_task_spec.w.replica", "must be at least 1, got %d", 0)
	want := "name: is required; role_to_task_spec.w.replica: must be at least 1, got 0"
	if got := fe.Err().Error(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestMessage(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{status.Error(codes.NotFound, "no experiment exp-1"), "no experiment exp-1"},
		{Invalid("--rank", "must not be negative"), "--rank: must not be negative"},
		{errors.New("disk full"), "disk full"},
	} {
		if got := Message(tt.err); got != tt.want {
			t.Errorf("Message(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
