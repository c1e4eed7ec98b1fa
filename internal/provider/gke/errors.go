package gke

import (
	"errors"
	"net/http"
	"strings"

	"google.golang.org/api/googleapi"

	"github.com/falconhq/falcon/internal/lifecycle"
)

// PoolError is a node pool failure the job fails with: Reason is
// NodePoolTimeout or NodePoolFailed and Message is what the job's Message
// becomes (GKE's own text when GKE gave one).
type PoolError struct {
	Reason  lifecycle.Reason
	Pool    string
	Message string
	Err     error // the API error behind it, if any
}

func (e *PoolError) Error() string { return e.Message }
func (e *PoolError) Unwrap() error { return e.Err }

// ReasonOf returns the lifecycle.Reason carried by err, if err is (or wraps)
// a *PoolError.
func ReasonOf(err error) (lifecycle.Reason, bool) {
	var pe *PoolError
	if errors.As(err, &pe) {
		return pe.Reason, true
	}
	return "", false
}

func failed(pool, msg string, err error) *PoolError {
	return &PoolError{Reason: lifecycle.ReasonNodePoolFailed, Pool: pool, Message: msg, Err: err}
}

func isNotFound(err error) bool { return apiCode(err) == http.StatusNotFound }
func isConflict(err error) bool { return apiCode(err) == http.StatusConflict }

func apiCode(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// transient reports whether retrying err may succeed: server errors, rate
// limits, transport failures, and GKE's refusal while another operation
// runs on the same pool ("Operation ... is currently creating node pool").
func transient(err error) bool {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return true // transport: connection refused, reset, timeout
	}
	switch {
	case ge.Code >= 500, ge.Code == http.StatusTooManyRequests:
		return true
	}
	return busy(err)
}

// busy reports GKE's refusal to start an operation on a pool while another
// one runs on it ("Operation ... is currently creating node pool ...").
func busy(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusBadRequest &&
		strings.Contains(ge.Body, "FAILED_PRECONDITION") && strings.Contains(ge.Message, "currently")
}

// apiMessage is GKE's own message when err is an API error.
func apiMessage(err error) string {
	if err == nil {
		return "unknown error"
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Message != "" {
		return ge.Message
	}
	return err.Error()
}
