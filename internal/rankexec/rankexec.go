package rankexec

import (
	"errors"
	"fmt"
	"io"
	"syscall"
)

// Container is the container of a job's pod that an exec enters: the one
// that runs the task.
const Container = "task"

// TermSize is a terminal's size in characters.
type TermSize struct {
	Width, Height uint16
}

// Session is one command to run in a rank.
type Session struct {
	// Command is the argument vector, run as it is (no shell).
	Command []string
	// Stdin is the command's input; nil gives it none. Its end (io.EOF)
	// closes the command's stdin.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output as it comes. With
	// TTY the terminal's output goes to Stdout and Stderr is unused.
	Stdout, Stderr io.Writer
	// TTY runs the command on a terminal of Size, resized to each value
	// of Resize (nil: never).
	TTY    bool
	Size   *TermSize
	Resize <-chan TermSize
}

// Validate reports what is missing from s.
func (s *Session) Validate() error {
	switch {
	case len(s.Command) == 0 || s.Command[0] == "":
		return errors.New("rankexec: no command")
	case s.Stdout == nil || (!s.TTY && s.Stderr == nil):
		return errors.New("rankexec: stdout and stderr are required")
	}
	return nil
}

// ExitError is a command that ran and ended other than with exit code 0.
type ExitError struct {
	// Code is in the shell's convention: 128+Signal for a command killed
	// by a signal.
	Code int
	// Signal is the signal that killed it, when known.
	Signal int
}

func (e *ExitError) Error() string {
	if e.Signal > 0 {
		return fmt.Sprintf("command killed by signal %d (%v): exit code %d", e.Signal, syscall.Signal(e.Signal), e.Code)
	}
	return fmt.Sprintf("command exited with code %d", e.Code)
}

// NotFoundCode is the exit code of a command that could not be found or
// run, as a shell reports it.
const NotFoundCode = 127

// Code is the exit code of err in the shell's convention: 0 for nil, the
// ExitError's, and -1 for an error that is not a command's exit.
func Code(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	}
	return -1
}
