package lifecycle

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Entity is the part of a job, experiment or artifact that propagation reads.
type Entity struct {
	ID      string
	Role    string // jobs only
	Status  Status
	Reason  string
	Message string
	// StartedAt and FinishedAt are when a job began to run and ended
	// (jobs only; zero until then, or when the reader does not know).
	StartedAt, FinishedAt time.Time
}

// Update is one status change to apply with the precondition that the entity
// is still in From.
type Update struct {
	ID      string
	From    Status
	To      Status
	Reason  string
	Message string
	// StartedAt is when an experiment that begins to run began: its first
	// job's start. FinishedAt is when one that ends ended: its last job's
	// end. Either is earlier than the write when the change is seen late;
	// zero is the time of the write.
	StartedAt, FinishedAt time.Time
}

// Plan is what the expController must do for one experiment, in order:
// abort sibling jobs, then update the artifact, then the experiment (a
// success passes through Running, so Exp may hold two steps). An empty Plan
// means the experiment is already consistent with its jobs.
type Plan struct {
	AbortJobs []Update
	Artifact  *Update
	Exp       []Update
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return len(p.AbortJobs) == 0 && p.Artifact == nil && len(p.Exp) == 0 }

// Propagate derives an experiment's next status from its jobs (K8s Job ->
// Job -> Artifact -> Experiment). It is pure and idempotent: applied to the
// state its own plan produces, it returns an empty plan, which is what makes
// the expController reentrant after a crash at any line.
//
// The rules, in order:
//  1. A terminal experiment only gets its artifact closed, if a crash left it open.
//  2. An Aborting experiment becomes Aborted once every job is terminal; its
//     artifact is Failed with Reason Aborted (files written so far are kept).
//  3. If any role failed (or was aborted on its own), every other
//     non-terminal role is aborted (no Reason, a SiblingStopMessage): a multi-role
//     experiment is one unit, and a slice must not stay held for an
//     experiment that can no longer succeed. Once every job is terminal the
//     artifact and the experiment are Failed, carrying the failed job's Reason
//     (JobFailed, Timeout, ...) and a Message naming the role.
//  4. When every job Succeeded, the artifact and then the experiment succeed.
//  5. Otherwise the experiment is Running if any job runs, else Created, and
//     mirrors the most advanced pending job's Reason and Message so `exp get`
//     shows why it waits.
func Propagate(exp Entity, jobs []Entity, art *Entity) Plan {
	var p Plan
	jobs = sortedByRole(jobs)
	closeArtifact := func(to Status, reason, msg string) {
		if art != nil && art.Status == Created {
			p.Artifact = &Update{ID: art.ID, From: Created, To: to, Reason: reason, Message: msg}
		}
	}
	setExp := func(to Status, reason, msg string) {
		from := exp.Status
		if from == to && exp.Reason == reason && exp.Message == msg {
			return
		}
		if from == Created && to == Succeeded {
			p.Exp = append(p.Exp, Update{ID: exp.ID, From: Created, To: Running, StartedAt: firstStart(jobs)})
			from = Running
		}
		u := Update{ID: exp.ID, From: from, To: to, Reason: reason, Message: msg}
		if from == Created && to == Running {
			u.StartedAt = firstStart(jobs)
		}
		if ExperimentMachine.IsTerminal(to) {
			// Every job has ended (an experiment ends only then).
			u.FinishedAt = lastEnd(jobs)
		}
		p.Exp = append(p.Exp, u)
	}
	allTerminal := true
	for _, j := range jobs {
		if !JobMachine.IsTerminal(j.Status) {
			allTerminal = false
		}
	}

	switch {
	case ExperimentMachine.IsTerminal(exp.Status):
		switch exp.Status {
		case Succeeded:
			closeArtifact(Succeeded, "", "")
		case Failed:
			closeArtifact(Failed, exp.Reason, exp.Message)
		case Aborted:
			closeArtifact(Failed, string(ReasonAborted), abortedArtifactMessage)
		}
		return p
	case exp.Status == Aborting:
		if allTerminal {
			closeArtifact(Failed, string(ReasonAborted), abortedArtifactMessage)
			msg := exp.Message
			if msg == "" {
				msg = "aborted by user"
			}
			setExp(Aborted, "", msg)
		}
		return p
	}

	if culprit, ok := firstFailure(jobs); ok {
		for _, j := range jobs {
			if j.Status == Pending || j.Status == Running {
				p.AbortJobs = append(p.AbortJobs, Update{
					ID: j.ID, From: j.Status, To: Aborting,
					Message: SiblingStopMessage(culprit.Role),
				})
			}
		}
		reason, msg := culprit.Reason, fmt.Sprintf("role %s: %s", culprit.Role, culprit.Message)
		if culprit.Status != Failed {
			reason, msg = string(ReasonRoleFailed), fmt.Sprintf("role %s was aborted", culprit.Role)
		}
		if allTerminal {
			closeArtifact(Failed, reason, msg)
			setExp(Failed, reason, msg)
		} else {
			setExp(exp.Status, "", fmt.Sprintf("role %s failed; stopping the other roles", culprit.Role))
		}
		return p
	}

	succeeded, running := 0, 0
	for _, j := range jobs {
		switch j.Status {
		case Succeeded:
			succeeded++
		case Running:
			running++
		}
	}
	switch {
	case len(jobs) > 0 && succeeded == len(jobs):
		closeArtifact(Succeeded, "", "")
		setExp(Succeeded, "", "")
	case running > 0 || succeeded > 0 || exp.Status == Running:
		// Once running, an experiment never goes back to Created, even
		// while one role is still waiting for its slice.
		setExp(Running, "", runningMessage(jobs))
	default:
		j := mostAdvancedPending(jobs)
		if j == nil {
			return p
		}
		msg := j.Message
		if len(jobs) > 1 {
			msg = fmt.Sprintf("role %s: %s", j.Role, j.Message)
		}
		setExp(Created, j.Reason, msg)
	}
	return p
}

// firstStart is when the first of jobs that ran began, zero if none says.
func firstStart(jobs []Entity) time.Time {
	var first time.Time
	for _, j := range jobs {
		if !j.StartedAt.IsZero() && (first.IsZero() || j.StartedAt.Before(first)) {
			first = j.StartedAt
		}
	}
	return first
}

// lastEnd is when the last of jobs ended, zero if any end is unknown.
func lastEnd(jobs []Entity) time.Time {
	var last time.Time
	for _, j := range jobs {
		if j.FinishedAt.IsZero() {
			return time.Time{}
		}
		if j.FinishedAt.After(last) {
			last = j.FinishedAt
		}
	}
	return last
}

const abortedArtifactMessage = "experiment aborted; files written before the abort are kept"

func sortedByRole(jobs []Entity) []Entity {
	out := append([]Entity(nil), jobs...)
	sort.SliceStable(out, func(a, b int) bool { return out[a].Role < out[b].Role })
	return out
}

// firstFailure returns the job that sank the experiment: a Failed job if any
// (its Reason is the experiment's), else a job aborted on its own.
func firstFailure(jobs []Entity) (Entity, bool) {
	for _, j := range jobs {
		if j.Status == Failed {
			return j, true
		}
	}
	for _, j := range jobs {
		if (j.Status == Aborted || j.Status == Aborting) && !IsSiblingStop(j.Message) {
			return j, true
		}
	}
	return Entity{}, false
}

var pendingOrder = map[string]int{
	string(ReasonWaiting): 1, string(ReasonNext): 2, string(ReasonWaitingForPool): 3, string(ReasonProvisioning): 4,
	string(ReasonProvisioningFallback): 4, string(ReasonDispatching): 5,
}

func mostAdvancedPending(jobs []Entity) *Entity {
	var best *Entity
	for i := range jobs {
		j := &jobs[i]
		if j.Status != Pending {
			continue
		}
		if best == nil || pendingOrder[j.Reason] > pendingOrder[best.Reason] {
			best = j
		}
	}
	return best
}

func runningMessage(jobs []Entity) string {
	var parts []string
	for _, j := range jobs {
		parts = append(parts, fmt.Sprintf("%s %s", j.Role, j.Status))
	}
	return strings.Join(parts, ", ")
}
