package cloudlog

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Kind classifies why a workload's log could not be read, in terms an
// operator can act on.
type Kind string

const (
	KindPermissionDenied Kind = "permission_denied" // Falcon's service account may not read the project's logs
	KindNotFound         Kind = "not_found"         // the project (or log view) does not exist
	KindInvalidRequest   Kind = "invalid_request"   // Cloud Logging refused the query
	KindQuotaExhausted   Kind = "quota_exhausted"   // the project's read quota is used up for now
	KindUnavailable      Kind = "unavailable"       // Cloud Logging did not answer, or not in time
	KindCanceled         Kind = "canceled"          // Cloud Logging ended the call
	KindStorage          Kind = "storage"           // an exported object could not be written
	KindUnknown          Kind = "unknown"
)

// RetrievalError is 001's LogRetrievalError: reading or exporting a
// workload's log failed. It never fails the experiment; the caller marks the
// log missing with Reason and carries on. Its Unwrap is the original error,
// so the gRPC status from Cloud Logging is still there for errors.As and
// status.FromError.
type RetrievalError struct {
	Op      string     // what Falcon was doing: "list", "tail", "discover ranks", "export"
	Project string     // the project whose logs were read
	Rank    int        // the rank concerned, or -1
	Kind    Kind       // why, for operators and retry decisions
	Code    codes.Code // the gRPC code Cloud Logging answered, codes.Unknown for a non-gRPC cause
	Err     error      // the original error
}

func (e *RetrievalError) Error() string {
	where := "cloud logging " + e.Op
	if e.Rank >= 0 {
		where += " (rank " + strconv.Itoa(e.Rank) + ")"
	}
	return where + ": " + e.Reason() + ": " + e.Err.Error()
}

func (e *RetrievalError) Unwrap() error { return e.Err }

// Retryable reports whether the same request may succeed later without
// anyone changing anything. The Cloud Logging client has already retried
// transient codes with backoff by the time a RetrievalError exists.
func (e *RetrievalError) Retryable() bool {
	return e.Kind == KindQuotaExhausted || e.Kind == KindUnavailable
}

// Reason is the one sentence Falcon records when it marks a log missing.
func (e *RetrievalError) Reason() string {
	switch e.Kind {
	case KindPermissionDenied:
		return fmt.Sprintf("permission denied: Falcon's service account needs roles/logging.viewer on project %q", e.Project)
	case KindNotFound:
		return fmt.Sprintf("project %q or its logs were not found", e.Project)
	case KindInvalidRequest:
		return "Cloud Logging refused the query"
	case KindQuotaExhausted:
		return fmt.Sprintf("the Cloud Logging read quota of project %q is exhausted; try again later", e.Project)
	case KindUnavailable:
		return "Cloud Logging is unavailable or did not answer in time; try again later"
	case KindCanceled:
		return "Cloud Logging canceled the request"
	case KindStorage:
		return "the exported log could not be written to the bucket (Falcon's service account needs roles/storage.objectAdmin on it)"
	}
	return "Cloud Logging failed"
}

// retrievalError wraps a failure of Cloud Logging. It returns the caller's
// own context error unchanged: a user who hangs up is not a Cloud Logging
// failure to record.
func retrievalError(ctx context.Context, op, project string, rank int, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.Canceled || status.Code(err) == codes.DeadlineExceeded) {
		return ctx.Err()
	}
	var re *RetrievalError
	if errors.As(err, &re) {
		return err
	}
	code := status.Code(err)
	if errors.Is(err, context.DeadlineExceeded) {
		code = codes.DeadlineExceeded
	}
	return &RetrievalError{Op: op, Project: project, Rank: rank, Kind: kindOf(code), Code: code, Err: err}
}

// kindOf is the one map from Cloud Logging's gRPC codes to kinds.
func kindOf(c codes.Code) Kind {
	switch c {
	case codes.PermissionDenied, codes.Unauthenticated:
		return KindPermissionDenied
	case codes.NotFound:
		return KindNotFound
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return KindInvalidRequest
	case codes.ResourceExhausted:
		return KindQuotaExhausted
	case codes.Unavailable, codes.DeadlineExceeded, codes.Internal, codes.Aborted:
		return KindUnavailable
	case codes.Canceled:
		return KindCanceled
	}
	return KindUnknown
}

func storageError(ctx context.Context, project string, rank int, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &RetrievalError{Op: "export", Project: project, Rank: rank, Kind: KindStorage, Code: status.Code(err), Err: err}
}
