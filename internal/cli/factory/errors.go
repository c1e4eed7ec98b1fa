package factory

import (
	"fmt"

	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/errdefs"
)

// ExitError ends a command with an exit code of its own choosing, for
// outcomes that are not a gRPC status: `exp wait` seeing an experiment fail
// (errdefs.ExitNotSucceeded) or giving up (errdefs.ExitTimeout), or a
// multi-ID command reporting its worst result. Everything else should return
// the status or errdefs error itself and let the one mapping in errdefs
// choose the code.
type ExitError struct {
	// Code is one of the errdefs.Exit* constants.
	Code int
	// Kind names the outcome in machine-readable error output, e.g.
	// "NotSucceeded", "Timeout", or a gRPC code name.
	Kind string
	Err  error
	// Quiet: the command has already said all there is to say (`exp
	// exec`: the remote command's own stderr), so no "Error:" line is
	// printed; the exit code is the answer.
	Quiet bool
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ConfirmOrRequireYes is the rule for destructive commands: --yes skips the
// question; otherwise a person at a terminal is asked, and a script (stdin
// not a terminal) is refused with InvalidArgument, because a script that
// would block on a prompt it cannot answer is worse than one that fails.
// It returns false when the person answered no.
func ConfirmOrRequireYes(ios *iostreams.IOStreams, yes bool, question string) (bool, error) {
	if yes {
		return true, nil
	}
	if !ios.IsStdinTTY() {
		return false, errdefs.Invalid("--yes", "required when stdin is not a terminal (nothing can answer the confirmation prompt)")
	}
	return ios.Confirm(question)
}

// Declined is the error of a destructive command whose prompt was answered no.
func Declined(what string) error {
	return &ExitError{Code: errdefs.ExitError, Kind: "Cancelled", Err: fmt.Errorf("cancelled: %s", what)}
}
