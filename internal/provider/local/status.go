package local

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/falconhq/falcon/internal/exitcode"
)

// Phase is the coarse state of a job, derived from its ranks.
type Phase string

const (
	PhaseRunning   Phase = "Running"
	PhaseSucceeded Phase = "Succeeded"
	PhaseFailed    Phase = "Failed"
	PhaseUnknown   Phase = "Unknown" // the executor has never heard of the job
)

// Reason says why a job Failed, so the controller can branch without parsing
// Message. It is empty in every other phase.
type Reason string

const (
	// ReasonProcessFailed: a rank exited non-zero or died of a signal on its own.
	ReasonProcessFailed Reason = "ProcessFailed"
	// ReasonKilled: Kill was called while the job ran. Whether that was an
	// abort or a timeout is the caller's knowledge, not ours.
	ReasonKilled Reason = "Killed"
	// ReasonUnrecorded: a rank ended, but how was never recorded (its
	// supervisor was SIGKILLed, or never ran), so its exit code is unknown.
	ReasonUnrecorded Reason = "Unrecorded"
	// ReasonStopped: an older Falcon stopped the job itself when it shut
	// down or restarted; only read from the data directories it left.
	ReasonStopped Reason = "Stopped"
	// ReasonStartFailed: a rank could not be started at all.
	ReasonStartFailed Reason = "StartFailed"
)

// Status is what Status reports about one job.
type Status struct {
	Phase   Phase
	Reason  Reason // set only when Failed
	Message string // human readable, e.g. "rank 1 (pod job-x-1) exited with code 3"
	// ExitCode is the exit code of the rank whose failure failed the job (the
	// first to fail), 128+n if it died of signal n, and -1 if it is unknown
	// (unrecorded, not started). Zero unless Failed.
	ExitCode int
	// EndedAt is when the job ended, as its ranks' exit markers record
	// it: a success's last exit, a failure's first (the rank that failed
	// it). Zero while it runs, and when that end was not recorded (its
	// marker dates only when Falcon found the rank gone).
	EndedAt time.Time
	Pods    []PodStatus // one per rank, in rank order
}

// PodStatus is one rank. Pods are named like an Indexed Job's: <jobID>-<rank>.
type PodStatus struct {
	Name     string
	Rank     int
	Running  bool
	ExitCode *int // nil while running, or if the rank's exit status is unknown
}

// rankView is one rank as summarize sees it: nil exit means still running.
type rankView struct {
	rank int
	pod  string
	exit *exitRecord
}

// summarize derives a job's Status from its ranks. It is pure so the rules
// can be tested without processes. A job fails on its first root-cause rank
// (earliest recorded end, then lowest rank), never on the ranks that were
// stopped because of it.
func summarize(ranks []rankView) Status {
	st := Status{Pods: make([]PodStatus, len(ranks))}
	running := 0
	var culprit *rankView
	for i := range ranks {
		r := &ranks[i]
		st.Pods[i] = PodStatus{Name: r.pod, Rank: r.rank, Running: r.exit == nil}
		if r.exit == nil {
			running++
			continue
		}
		st.Pods[i].ExitCode = r.exit.exitCode()
		if r.exit.rootCause() && (culprit == nil || r.exit.Time.Before(culprit.exit.Time)) {
			culprit = r
		}
	}
	switch {
	case culprit != nil:
		st.Phase = PhaseFailed
		st.Reason, st.Message = failure(culprit, ranks)
		st.ExitCode = -1
		if c := culprit.exit.exitCode(); c != nil {
			st.ExitCode = *c
		}
		if culprit.exit.End != endUnrecorded {
			st.EndedAt = culprit.exit.Time
		}
	case running > 0:
		st.Phase = PhaseRunning
		st.Message = fmt.Sprintf("%d/%d processes running", running, len(ranks))
	case slices.ContainsFunc(ranks, func(r rankView) bool { return !r.exit.succeeded() }):
		// Only non-root ends (stopped for a sibling) without their root: the
		// markers were tampered with. Say so rather than guess.
		st.Phase, st.Reason, st.ExitCode = PhaseFailed, ReasonUnrecorded, -1
		st.Message = "the ranks' exit markers are inconsistent: some were stopped for a failure none records"
	default:
		st.Phase = PhaseSucceeded
		st.Message = fmt.Sprintf("%d/%d processes exited with code 0", len(ranks), len(ranks))
		for _, r := range ranks {
			if r.exit.Time.After(st.EndedAt) {
				st.EndedAt = r.exit.Time
			}
		}
	}
	return st
}

func failure(c *rankView, ranks []rankView) (Reason, string) {
	x := c.exit
	switch x.End {
	case endExited:
		if x.Code != nil {
			msg := fmt.Sprintf("rank %d (pod %s) exited with code %d", c.rank, c.pod, *x.Code)
			if k := exitcode.Killed(*x.Code); k != "" {
				msg += " (" + k + ")"
			}
			return ReasonProcessFailed, msg
		}
		return ReasonProcessFailed, fmt.Sprintf("rank %d (pod %s) was killed by signal %d (%v)",
			c.rank, c.pod, x.Signal, syscall.Signal(x.Signal))
	case endKilled:
		return ReasonKilled, "killed"
	case endStartFailed:
		return ReasonStartFailed, fmt.Sprintf("rank %d (pod %s) failed to start: %s", c.rank, c.pod, x.Detail)
	case endUnrecorded:
		return ReasonUnrecorded, unrecorded(c, ranks)
	case endLost, endShutdown:
		when := "restarted"
		if x.End == endShutdown {
			when = "shut down"
		}
		return ReasonStopped, fmt.Sprintf("falcon stopped the job's processes when it %s (%s)", when, pids(c, ranks))
	}
	return ReasonUnrecorded, fmt.Sprintf("rank %d (pod %s) ended in an unknown way (%q)", c.rank, c.pod, x.End)
}

// unrecorded says what is known of a rank that ended without a recorded
// exit status, and names the other ranks that ended the same way.
func unrecorded(c *rankView, ranks []rankView) string {
	x := c.exit
	var msg string
	switch {
	case x.Pid == 0:
		// No pid file and no supervisor to be found: the executor stopped
		// between recording the job and recording this rank's process.
		msg = fmt.Sprintf("rank %d (pod %s) has no recorded process and none runs: falcon stopped while starting it", c.rank, c.pod)
	case x.Unwatched:
		msg = fmt.Sprintf("rank %d's process (pid %d) ended while falcon was not running; its exit status was not recorded", c.rank, x.Pid)
	default:
		msg = fmt.Sprintf("rank %d's process (pid %d) ended without recording its exit status", c.rank, x.Pid)
	}
	if x.Detail != "" {
		msg += " (" + x.Detail + ")"
	}
	var also []string
	for i := range ranks {
		r := &ranks[i]
		if r.rank != c.rank && r.exit != nil && r.exit.End == endUnrecorded {
			also = append(also, fmt.Sprintf("rank %d", r.rank))
		}
	}
	if len(also) > 0 {
		msg += "; so did " + strings.Join(also, ", ")
	}
	return msg
}

// pids names the pid of every rank that ended as c did.
func pids(c *rankView, ranks []rankView) string {
	var which []string
	for _, r := range ranks {
		if r.exit == nil || r.exit.End != c.exit.End {
			continue
		}
		if r.exit.Pid > 0 {
			which = append(which, fmt.Sprintf("rank %d was pid %d", r.rank, r.exit.Pid))
		} else {
			which = append(which, fmt.Sprintf("rank %d had not recorded its pid", r.rank))
		}
	}
	return strings.Join(which, ", ")
}
