package errdefs

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/falconhq/falcon/internal/lifecycle"
)

// Sentinel kinds. Wrap them (fmt.Errorf("...: %w", ErrNotFound)) or use the
// constructors below; errors.Is finds the kind through any wrapping.
var (
	ErrInvalid            = errors.New("invalid argument")
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrUnauthenticated    = errors.New("unauthenticated")
	ErrPermissionDenied   = errors.New("permission denied")
	ErrUnavailable        = errors.New("unavailable")
)

// FieldError is bad input: the field path that is wrong and what is allowed.
type FieldError struct {
	Field  string // e.g. "role_to_task_spec.worker.replica"
	Detail string // e.g. "must be at least 1, got 0"
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Detail }
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Invalid returns a *FieldError for field.
func Invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Detail: fmt.Sprintf(format, args...)}
}

// FieldErrors collects every problem of one request so a user fixes them all
// in one round trip instead of one per attempt.
type FieldErrors []*FieldError

func (fe FieldErrors) Error() string {
	parts := make([]string, len(fe))
	for i, e := range fe {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}
func (fe FieldErrors) Unwrap() error { return ErrInvalid }

// Err returns nil when fe is empty, so validators can end with `return errs.Err()`.
func (fe FieldErrors) Err() error {
	if len(fe) == 0 {
		return nil
	}
	return fe
}

// Add appends a field error.
func (fe *FieldErrors) Add(field, format string, args ...any) {
	*fe = append(*fe, &FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
}

// NotFound reports a missing entity by kind and ID.
func NotFound(kind, id string) error {
	return fmt.Errorf("%s %q %w", kind, id, ErrNotFound)
}

// Precondition reports that the entity is not in the state the caller expected.
func Precondition(format string, args ...any) error {
	return &kinded{kind: ErrFailedPrecondition, msg: fmt.Sprintf(format, args...)}
}

// NotFoundf reports a missing entity in a sentence of the caller's.
func NotFoundf(format string, args ...any) error {
	return &kinded{kind: ErrNotFound, msg: fmt.Sprintf(format, args...)}
}

// AlreadyExists reports a conflict with an existing entity (a taken name).
func AlreadyExists(format string, args ...any) error {
	return &kinded{kind: ErrAlreadyExists, msg: fmt.Sprintf(format, args...)}
}

// kinded is an error of a kind (one of the sentinels above) whose message is
// its own sentence alone: users read it, so it carries no "failed
// precondition:" prefix of the kind's name.
type kinded struct {
	kind error
	msg  string
}

func (e *kinded) Error() string { return e.msg }
func (e *kinded) Unwrap() error { return e.kind }

// ToStatus maps an error to a gRPC status error. Errors that already carry a
// gRPC status pass through; unknown errors become Internal.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(Code(err), err.Error())
}

// Message is an error's text as a user reads it: a status error's message
// only, since "rpc error: code = NotFound desc = " is noise to a user.
func Message(err error) string {
	if se, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return se.GRPCStatus().Message()
	}
	return err.Error()
}

// Code returns the gRPC code for a domain error.
func Code(err error) codes.Code {
	var illegal *lifecycle.IllegalTransitionError
	switch {
	case err == nil:
		return codes.OK
	case errors.Is(err, ErrInvalid):
		return codes.InvalidArgument
	case errors.Is(err, ErrNotFound):
		return codes.NotFound
	case errors.Is(err, ErrAlreadyExists):
		return codes.AlreadyExists
	case errors.Is(err, ErrFailedPrecondition), errors.As(err, &illegal):
		return codes.FailedPrecondition
	case errors.Is(err, ErrUnauthenticated):
		return codes.Unauthenticated
	case errors.Is(err, ErrPermissionDenied):
		return codes.PermissionDenied
	case errors.Is(err, ErrUnavailable), unreachable(err):
		return codes.Unavailable
	case errors.Is(err, context.Canceled):
		// The client hung up (or the server is shutting down): not a fault
		// of Falcon's to log as Internal.
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.Internal
}

// unreachable reports whether err is a failure to reach a service Falcon
// depends on (its database, mostly): a connection refused, reset or cut, or
// one the driver gave up as bad. Clients are to retry those (Unavailable),
// not report them as a bug in Falcon (Internal).
func unreachable(err error) bool {
	var op *net.OpError
	switch {
	case errors.As(err, &op), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	return false
}

// CLI exit codes. Scripts and agents branch on them, so they are stable.
const (
	ExitOK           = 0
	ExitError        = 1 // anything not listed below
	ExitInvalid      = 2 // bad input: flags, manifest, arguments
	ExitNotFound     = 3
	ExitPrecondition = 4 // the entity is not in a state that allows the call, or the name is taken
	ExitAuth         = 5 // not logged in or not allowed
	ExitUnavailable  = 6 // the server could not be reached
	ExitNotSucceeded = 7 // `exp wait`: the experiment ended but did not succeed
	ExitTimeout      = 8 // `exp wait`: gave up before the experiment ended
	ExitRegression   = 9 // `exp compare --fail-on-regression`: a metric regressed
)

// ExitCode maps a gRPC code to the CLI's exit code.
func ExitCode(c codes.Code) int {
	switch c {
	case codes.OK:
		return ExitOK
	case codes.InvalidArgument, codes.OutOfRange:
		return ExitInvalid
	case codes.NotFound:
		return ExitNotFound
	case codes.FailedPrecondition, codes.AlreadyExists, codes.Aborted:
		return ExitPrecondition
	case codes.Unauthenticated, codes.PermissionDenied:
		return ExitAuth
	case codes.Unavailable:
		return ExitUnavailable
	case codes.DeadlineExceeded:
		return ExitTimeout
	}
	return ExitError
}

// Unavailable reports that a service Falcon depends on (its database, a
// bucket, a cluster) could not serve the call; clients may retry.
func Unavailable(format string, args ...any) error {
	return &kinded{kind: ErrUnavailable, msg: fmt.Sprintf(format, args...)}
}

// PermissionDenied reports that the caller, or Falcon on its behalf, may
// not do this.
func PermissionDenied(format string, args ...any) error {
	return &kinded{kind: ErrPermissionDenied, msg: fmt.Sprintf(format, args...)}
}
