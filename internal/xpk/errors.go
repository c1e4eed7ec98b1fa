package xpk

import (
	"fmt"
	"strings"
	"time"
)

// WorkloadSubmitError is a `xpk workload create` that failed.
type WorkloadSubmitError struct {
	Cluster, Workload string
	ExitCode          int
	Stderr            string
}

func (e *WorkloadSubmitError) Error() string {
	return fmt.Sprintf("xpk workload create %s on cluster %s failed (exit code %d): %s", e.Workload, e.Cluster, e.ExitCode, tail(e.Stderr))
}

// WorkloadNotFoundError is a workload xpk does not know: a cancel of it has
// nothing to do (a warning, not a failure).
type WorkloadNotFoundError struct {
	Cluster, Workload string
	Detail            string
}

func (e *WorkloadNotFoundError) Error() string {
	msg := fmt.Sprintf("workload %s does not exist on cluster %s", e.Workload, e.Cluster)
	if e.Detail != "" {
		msg += ": " + tail(e.Detail)
	}
	return msg
}

// ClusterUnreachableError is an xpk command that did not answer: it timed
// out, exited non-zero, or could not be started (Err says why then).
type ClusterUnreachableError struct {
	Cluster  string
	Command  string // "workload list", ...
	Timeout  time.Duration
	TimedOut bool
	ExitCode int
	Stderr   string
	Err      error
}

func (e *ClusterUnreachableError) Error() string {
	switch {
	case e.TimedOut:
		return fmt.Sprintf("xpk %s on cluster %s timed out after %s", e.Command, e.Cluster, e.Timeout)
	case e.Err != nil:
		return fmt.Sprintf("xpk %s on cluster %s could not run: %v", e.Command, e.Cluster, e.Err)
	}
	return fmt.Sprintf("xpk %s on cluster %s failed (exit code %d): %s", e.Command, e.Cluster, e.ExitCode, tail(e.Stderr))
}

func (e *ClusterUnreachableError) Unwrap() error { return e.Err }

// OutputError is xpk output that cannot be read as its table.
type OutputError struct {
	Cluster string
	Detail  string
	Output  string
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("cannot read the output of xpk workload list on cluster %s: %s; output: %q", e.Cluster, e.Detail, tail(e.Output))
}

// tail is the end of a command's output, where xpk and kubectl say what
// went wrong, trimmed to a size a status message can carry.
func tail(s string) string {
	s = strings.TrimSpace(s)
	const max = 800
	if len(s) > max {
		s = "..." + s[len(s)-max:]
	}
	if s == "" {
		return "(no output)"
	}
	return s
}
