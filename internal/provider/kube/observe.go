package kube

import (
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/falconhq/falcon/internal/exitcode"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/resourcemanager"
)

// waitingFailures are container waiting reasons that never resolve on their
// own: the Job would sit forever, so Falcon fails it and says why.
var waitingFailures = map[string]bool{
	"ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true,
}

// Observe maps a Kubernetes Job and its pods to Falcon's view. It is pure so
// every mapping rule is table-tested without a cluster:
//   - the Job's Complete (or SuccessCriteriaMet) condition, or a Succeeded
//     pod for every completion index -> Succeeded: an Indexed Job whose
//     indexes all succeeded has succeeded, and the Job controller's
//     condition follows it late on a busy cluster (seconds), so the pods
//     are not made to wait for it;
//   - a pod whose container terminated non-zero, or the Job's Failed
//     condition -> Failed, naming the pod, the reason (OOMKilled, Error) and
//     the exit code;
//   - a container stuck in ImagePullBackOff and the like -> Failed;
//   - every replica's pod Running -> Running (this releases the queue slot);
//   - otherwise Pending, with the scheduler's message for an unschedulable
//     pod or a count of pods running.
//
// A start or an end is dated as the cluster dates it (Observation.At): a
// job that runs by its last container's start; a success by the Job's
// completion time (else its condition's), or by the last exit of the pods
// that made it, and its start (Observation.Began) by the last of those
// pods' starts; a failure by the failing container's exit, or by the Job's
// Failed condition. A container that never started (an image that cannot
// be pulled) leaves it undated.
func Observe(job *batchv1.Job, pods []*corev1.Pod, replica int) resourcemanager.Observation {
	sort.Slice(pods, func(a, b int) bool { return pods[a].Name < pods[b].Name })
	if ok, ended, began := succeeded(job, pods, replica); ok {
		// Every index of the Indexed Job (completions = replica) is done.
		return resourcemanager.Observation{Phase: resourcemanager.PhaseSucceeded,
			Message: fmt.Sprintf("%d/%d pods succeeded", replica, replica), At: ended, Began: began}
	}
	for _, p := range pods {
		if msg, at, ok := podFailure(p); ok {
			return resourcemanager.Observation{Phase: resourcemanager.PhaseFailed, Message: msg, At: at}
		}
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			msg := "Job failed"
			if c.Reason != "" {
				msg += ": " + c.Reason
			}
			if c.Message != "" {
				msg += ": " + c.Message
			}
			return resourcemanager.Observation{Phase: resourcemanager.PhaseFailed, Message: msg, At: c.LastTransitionTime.Time}
		}
	}
	running := 0
	var why []string
	var began latest // when the last running pod's containers all ran
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		switch p.Status.Phase {
		case corev1.PodRunning:
			running++
			began.add(ran(p))
		case corev1.PodPending:
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					why = append(why, fmt.Sprintf("pod %s unschedulable: %s", p.Name, c.Message))
				}
			}
		}
	}
	if running >= replica && replica > 0 {
		return resourcemanager.Observation{Phase: resourcemanager.PhaseRunning, Message: fmt.Sprintf("%d/%d pods running", running, replica), At: began.time()}
	}
	msg := fmt.Sprintf("%d/%d pods running", running, replica)
	if len(why) > 0 {
		msg += "; " + why[0]
	}
	return resourcemanager.Observation{Phase: resourcemanager.PhasePending, Message: msg}
}

// succeeded reports whether the Job says it succeeded (Complete or
// SuccessCriteriaMet), or every completion index below replica has a
// Succeeded pod, when it ended and when it began (each zero if the
// cluster does not say). A pod without an index counts for nothing, so a
// pod Falcon did not render cannot make a job look done.
func succeeded(job *batchv1.Job, pods []*corev1.Pod, replica int) (ok bool, ended, began time.Time) {
	done := map[int]bool{}
	var last, first latest
	for _, p := range pods {
		if i := render.CompletionIndex(p); p.Status.Phase == corev1.PodSucceeded && i >= 0 && i < replica && !done[i] {
			done[i] = true
			end, start := exited(p)
			last.add(end)
			first.add(start)
		}
	}
	all := replica > 0 && len(done) == replica
	if all {
		began = first.time()
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobSuccessCriteriaMet) && c.Status == corev1.ConditionTrue {
			if t := job.Status.CompletionTime; t != nil {
				return true, t.Time, began
			}
			return true, c.LastTransitionTime.Time, began
		}
	}
	return all, last.time(), began
}

// latest is the latest of the times added, and zero once one of them is
// zero: a job's start or end is known only when each of its parts says
// when.
type latest struct {
	t       time.Time
	unknown bool
}

func (l *latest) add(t time.Time) {
	if t.IsZero() {
		l.unknown = true
	} else if t.After(l.t) {
		l.t = t
	}
}

func (l latest) time() time.Time {
	if l.unknown {
		return time.Time{}
	}
	return l.t
}

// ran is when the last of a running pod's containers started, zero if one
// of them does not run (or the kubelet did not say).
func ran(p *corev1.Pod) time.Time {
	var last latest
	for _, cs := range p.Status.ContainerStatuses {
		if r := cs.State.Running; r != nil {
			last.add(r.StartedAt.Time)
		} else {
			last.add(time.Time{})
		}
	}
	return last.time()
}

// exited is when the last of a pod's containers exited, and when the last
// of them had started, each zero if one of them has not exited (or the
// kubelet did not say).
func exited(p *corev1.Pod) (end, start time.Time) {
	var last, began latest
	for _, cs := range p.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil {
			t = &corev1.ContainerStateTerminated{}
		}
		last.add(t.FinishedAt.Time)
		began.add(t.StartedAt.Time)
	}
	return last.time(), began.time()
}

// ObserveSlices combines the observations of a multi-slice job's Jobs, in
// slice order, into the job's: the slices run as one job, so
//   - any slice Failed -> Failed (the manager then stops every slice),
//     naming the slice;
//   - any slice gone -> Unknown, naming it;
//   - every slice Succeeded -> Succeeded;
//   - every slice Running (or already done) -> Running, which releases the
//     queue slot only once all slices have their hosts;
//   - otherwise Pending, saying how many slices are running and why the
//     first one that is not waits.
func ObserveSlices(slices []resourcemanager.Observation) resourcemanager.Observation {
	n := len(slices)
	for _, want := range []resourcemanager.Phase{resourcemanager.PhaseFailed, resourcemanager.PhaseUnknown} {
		for i, o := range slices {
			if o.Phase == want {
				return resourcemanager.Observation{Phase: want, Message: fmt.Sprintf("slice %d of %d: %s", i, n, o.Message), At: o.At}
			}
		}
	}
	succeeded, running, waiting := 0, 0, -1
	var ended, began latest // the last slice's end, and its start
	for i, o := range slices {
		switch o.Phase {
		case resourcemanager.PhaseSucceeded:
			ended.add(o.At)
			began.add(o.Began)
			succeeded++
		case resourcemanager.PhaseRunning:
			running++
		default:
			if waiting < 0 {
				waiting = i
			}
		}
	}
	switch {
	case n > 0 && succeeded == n:
		return resourcemanager.Observation{Phase: resourcemanager.PhaseSucceeded, Message: fmt.Sprintf("%d/%d slices succeeded", n, n), At: ended.time(), Began: began.time()}
	case n > 0 && waiting < 0:
		// Dated only when every slice runs: a slice that is done dates
		// its end, not its start.
		var ran latest
		for _, o := range slices {
			if o.Phase == resourcemanager.PhaseRunning {
				ran.add(o.At)
			} else {
				ran.add(time.Time{})
			}
		}
		msg := fmt.Sprintf("%d/%d slices running", running+succeeded, n)
		if succeeded > 0 {
			msg += fmt.Sprintf(" (%d succeeded)", succeeded)
		}
		return resourcemanager.Observation{Phase: resourcemanager.PhaseRunning, Message: msg, At: ran.time()}
	}
	msg := fmt.Sprintf("%d/%d slices running", running+succeeded, n)
	if waiting >= 0 {
		msg += fmt.Sprintf("; slice %d: %s", waiting, slices[waiting].Message)
	}
	return resourcemanager.Observation{Phase: resourcemanager.PhasePending, Message: msg}
}

// podFailure reports why a pod has failed for good, if it has, and when its
// failing container exited (zero if it never ran, or the kubelet does not
// say).
func podFailure(p *corev1.Pod) (string, time.Time, bool) {
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			reason := t.Reason
			if reason == "" {
				reason = "Error"
			}
			code := fmt.Sprint(t.ExitCode)
			if k := exitcode.Killed(int(t.ExitCode)); k != "" {
				code += ": " + k
			}
			msg := fmt.Sprintf("pod %s terminated: %s (exit code %s)", p.Name, reason, code)
			if t.Message != "" {
				msg += ": " + strings.TrimSpace(t.Message)
			}
			return msg, t.FinishedAt.Time, true
		}
		if w := cs.State.Waiting; w != nil && waitingFailures[w.Reason] {
			msg := fmt.Sprintf("pod %s: %s", p.Name, w.Reason)
			if w.Message != "" {
				msg += ": " + w.Message
			}
			return msg, time.Time{}, true
		}
	}
	if p.Status.Phase == corev1.PodFailed {
		msg := fmt.Sprintf("pod %s failed", p.Name)
		if p.Status.Reason != "" {
			msg += ": " + p.Status.Reason
		}
		if p.Status.Message != "" {
			msg += ": " + p.Status.Message
		}
		return msg, time.Time{}, true
	}
	return "", time.Time{}, false
}
