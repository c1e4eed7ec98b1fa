package kube

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/falconhq/falcon/internal/resourcemanager"
)

func pod(name string, phase corev1.PodPhase, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase}}
	for _, m := range mods {
		m(p)
	}
	return p
}

func index(i string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: i}
	}
}

func terminated(reason string, code int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "task", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}}}}
	}
}

func waiting(reason, msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "task", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	}
}

func unschedulable(msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: msg}}
	}
}

func jobWith(conds ...batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{}
	for _, c := range conds {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"})
	}
	return j
}

func TestObserve(t *testing.T) {
	tests := []struct {
		name    string
		job     *batchv1.Job
		pods    []*corev1.Pod
		replica int
		phase   resourcemanager.Phase
		inMsg   []string
	}{
		{"complete", jobWith(batchv1.JobComplete), nil, 2, resourcemanager.PhaseSucceeded, []string{"pods succeeded"}},
		{"all running", jobWith(), []*corev1.Pod{pod("a", corev1.PodRunning), pod("b", corev1.PodRunning)}, 2, resourcemanager.PhaseRunning, []string{"2/2 pods running"}},
		{"one of two running", jobWith(), []*corev1.Pod{pod("a", corev1.PodRunning), pod("b", corev1.PodPending)}, 2, resourcemanager.PhasePending, []string{"1/2 pods running"}},
		{"no pods yet", jobWith(), nil, 1, resourcemanager.PhasePending, []string{"0/1"}},
		{"unschedulable", jobWith(), []*corev1.Pod{pod("a", corev1.PodPending, unschedulable("0/3 nodes are available: 3 Insufficient google.com/tpu."))}, 1,
			resourcemanager.PhasePending, []string{"unschedulable", "Insufficient google.com/tpu"}},
		{"exit code", jobWith(), []*corev1.Pod{pod("a", corev1.PodFailed, terminated("Error", 3))}, 1, resourcemanager.PhaseFailed, []string{"pod a", "exit code 3"}},
		{"oom", jobWith(batchv1.JobFailed), []*corev1.Pod{pod("a", corev1.PodFailed, terminated("OOMKilled", 137))}, 1, resourcemanager.PhaseFailed, []string{"OOMKilled", "exit code 137: killed by SIGKILL"}},
		{"a signal's exit code", jobWith(), []*corev1.Pod{pod("a", corev1.PodFailed, terminated("Error", 143))}, 1, resourcemanager.PhaseFailed, []string{"pod a terminated: Error (exit code 143: killed by SIGTERM)"}},
		{"image pull", jobWith(), []*corev1.Pod{pod("a", corev1.PodPending, waiting("ImagePullBackOff", "Back-off pulling image \"nope\""))}, 1, resourcemanager.PhaseFailed, []string{"ImagePullBackOff", "nope"}},
		{"job failed without pods", jobWith(batchv1.JobFailed), nil, 1, resourcemanager.PhaseFailed, []string{"Job failed", "BackoffLimitExceeded"}},
		{"exit zero while others run", jobWith(), []*corev1.Pod{pod("a", corev1.PodSucceeded, terminated("Completed", 0)), pod("b", corev1.PodRunning)}, 2, resourcemanager.PhasePending, []string{"1/2"}},
		{"success criteria met", jobWith(batchv1.JobSuccessCriteriaMet), nil, 2, resourcemanager.PhaseSucceeded, []string{"2/2 pods succeeded"}},
		{"every index succeeded before the Job's condition", jobWith(),
			[]*corev1.Pod{pod("a", corev1.PodSucceeded, index("0")), pod("b", corev1.PodSucceeded, index("1"))}, 2, resourcemanager.PhaseSucceeded, []string{"2/2 pods succeeded"}},
		{"one index succeeded twice is not two", jobWith(),
			[]*corev1.Pod{pod("a", corev1.PodSucceeded, index("0")), pod("a2", corev1.PodSucceeded, index("0")), pod("b", corev1.PodRunning, index("1"))}, 2, resourcemanager.PhasePending, []string{"1/2 pods running"}},
		{"a succeeded pod without an index counts for nothing", jobWith(),
			[]*corev1.Pod{pod("a", corev1.PodSucceeded)}, 1, resourcemanager.PhasePending, []string{"0/1"}},
		{"an index out of range counts for nothing", jobWith(),
			[]*corev1.Pod{pod("a", corev1.PodSucceeded, index("1"))}, 1, resourcemanager.PhasePending, []string{"0/1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Observe(tt.job, tt.pods, tt.replica)
			if got.Phase != tt.phase {
				t.Fatalf("phase %s, want %s (%q)", got.Phase, tt.phase, got.Message)
			}
			for _, s := range tt.inMsg {
				if !strings.Contains(got.Message, s) {
					t.Errorf("message %q lacks %q", got.Message, s)
				}
			}
		})
	}
}

// TestObserveDatesEnds: an end is dated as the cluster dates it, so that a
// job whose end the controller saw late still says when it ended.
func TestObserveDatesEnds(t *testing.T) {
	t1 := time.Date(2026, 12, 8, 1, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Minute)
	exitedAt := func(code int32, at time.Time) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "task", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", ExitCode: code,
					StartedAt: metav1.NewTime(at.Add(-time.Hour)), FinishedAt: metav1.NewTime(at)}}}}
		}
	}
	runningSince := func(at time.Time) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "task", State: corev1.ContainerState{
				Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}}
		}
	}
	cond := func(typ batchv1.JobConditionType, at time.Time) *batchv1.Job {
		return &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}}}
	}
	completed := cond(batchv1.JobComplete, t2)
	completed.Status.CompletionTime = &metav1.Time{Time: t1}
	tests := []struct {
		name  string
		job   *batchv1.Job
		pods  []*corev1.Pod
		phase resourcemanager.Phase
		at    time.Time
	}{
		{"the Job's completion time", completed, nil, resourcemanager.PhaseSucceeded, t1},
		{"else its condition's", cond(batchv1.JobSuccessCriteriaMet, t2), nil, resourcemanager.PhaseSucceeded, t2},
		{"else the last pod's exit", jobWith(),
			[]*corev1.Pod{pod("a", corev1.PodSucceeded, index("0"), exitedAt(0, t2)), pod("b", corev1.PodSucceeded, index("1"), exitedAt(0, t1))}, resourcemanager.PhaseSucceeded, t2},
		{"a pod that does not say leaves it undated", jobWith(),
			[]*corev1.Pod{pod("a", corev1.PodSucceeded, index("0"), exitedAt(0, t2)), pod("b", corev1.PodSucceeded, index("1"))}, resourcemanager.PhaseSucceeded, time.Time{}},
		{"a failure: the failing container's exit", jobWith(),
			[]*corev1.Pod{pod("a", corev1.PodFailed, exitedAt(3, t1)), pod("b", corev1.PodRunning)}, resourcemanager.PhaseFailed, t1},
		{"the Job's Failed condition", cond(batchv1.JobFailed, t2), nil, resourcemanager.PhaseFailed, t2},
		{"an image never pulled: undated", jobWith(),
			[]*corev1.Pod{pod("a", corev1.PodPending, waiting("ErrImagePull", "")), pod("b", corev1.PodRunning)}, resourcemanager.PhaseFailed, time.Time{}},
		{"running: the last container's start", jobWith(),
			[]*corev1.Pod{pod("a", corev1.PodRunning, runningSince(t2)), pod("b", corev1.PodRunning, runningSince(t1))}, resourcemanager.PhaseRunning, t2},
		{"running, a pod that does not say: undated", jobWith(),
			[]*corev1.Pod{pod("a", corev1.PodRunning, runningSince(t2)), pod("b", corev1.PodRunning)}, resourcemanager.PhaseRunning, time.Time{}},
		{"pending: no start", jobWith(),
			[]*corev1.Pod{pod("a", corev1.PodRunning, runningSince(t2)), pod("b", corev1.PodPending)}, resourcemanager.PhasePending, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Observe(tt.job, tt.pods, 2)
			if got.Phase != tt.phase || !got.At.Equal(tt.at) {
				t.Errorf("%s at %v, want %s at %v (%q)", got.Phase, got.At, tt.phase, tt.at, got.Message)
			}
		})
	}
	// A success's start: the last of its pods' starts, whichever says it
	// succeeded; unknown without every pod.
	twoDone := []*corev1.Pod{pod("a", corev1.PodSucceeded, index("0"), exitedAt(0, t2)), pod("b", corev1.PodSucceeded, index("1"), exitedAt(0, t1))}
	for _, tt := range []struct {
		name string
		job  *batchv1.Job
		pods []*corev1.Pod
		want time.Time
	}{
		{"by its pods", jobWith(), twoDone, t2.Add(-time.Hour)},
		{"by the Job's condition", completed, twoDone, t2.Add(-time.Hour)},
		{"its pods gone", completed, nil, time.Time{}},
		{"one pod that does not say", jobWith(), []*corev1.Pod{twoDone[0], pod("b", corev1.PodSucceeded, index("1"))}, time.Time{}},
	} {
		if got := Observe(tt.job, tt.pods, 2); got.Phase != resourcemanager.PhaseSucceeded || !got.Began.Equal(tt.want) {
			t.Errorf("began, %s: %s began %v, want %v", tt.name, got.Phase, got.Began, tt.want)
		}
	}
	at := func(p resourcemanager.Phase, at time.Time) resourcemanager.Observation {
		return resourcemanager.Observation{Phase: p, At: at}
	}
	for _, tt := range []struct {
		name   string
		slices []resourcemanager.Observation
		want   time.Time
	}{
		{"every slice done: the last", []resourcemanager.Observation{at(resourcemanager.PhaseSucceeded, t2), at(resourcemanager.PhaseSucceeded, t1)}, t2},
		{"one undated: undated", []resourcemanager.Observation{at(resourcemanager.PhaseSucceeded, t1), at(resourcemanager.PhaseSucceeded, time.Time{})}, time.Time{}},
		{"a failing slice: its failure", []resourcemanager.Observation{at(resourcemanager.PhaseRunning, time.Time{}), at(resourcemanager.PhaseFailed, t1)}, t1},
		{"every slice running: the last start", []resourcemanager.Observation{at(resourcemanager.PhaseRunning, t1), at(resourcemanager.PhaseRunning, t2)}, t2},
		{"one done, one running: undated", []resourcemanager.Observation{at(resourcemanager.PhaseSucceeded, t2), at(resourcemanager.PhaseRunning, t1)}, time.Time{}},
	} {
		if got := ObserveSlices(tt.slices); !got.At.Equal(tt.want) {
			t.Errorf("slices, %s: %s at %v, want %v", tt.name, got.Phase, got.At, tt.want)
		}
	}
	done := ObserveSlices([]resourcemanager.Observation{{Phase: resourcemanager.PhaseSucceeded, At: t1, Began: t2.Add(-time.Hour)}, {Phase: resourcemanager.PhaseSucceeded, At: t2, Began: t1.Add(-time.Hour)}})
	if !done.At.Equal(t2) || !done.Began.Equal(t2.Add(-time.Hour)) {
		t.Errorf("slices done: ended %v, began %v; want the last end %v and the last start %v", done.At, done.Began, t2, t2.Add(-time.Hour))
	}
}

func TestObserveSlices(t *testing.T) {
	o := func(p resourcemanager.Phase, msg string) resourcemanager.Observation {
		return resourcemanager.Observation{Phase: p, Message: msg}
	}
	const (
		pending   = resourcemanager.PhasePending
		running   = resourcemanager.PhaseRunning
		succeeded = resourcemanager.PhaseSucceeded
		failed    = resourcemanager.PhaseFailed
		unknown   = resourcemanager.PhaseUnknown
	)
	tests := []struct {
		name   string
		slices []resourcemanager.Observation
		want   resourcemanager.Observation
	}{
		{"all running", []resourcemanager.Observation{o(running, "4/4 pods running"), o(running, "4/4 pods running")},
			o(running, "2/2 slices running")},
		{"one slice still waiting for hosts holds the job pending",
			[]resourcemanager.Observation{o(running, "4/4 pods running"), o(pending, "1/4 pods running; pod x unschedulable")},
			o(pending, "1/2 slices running; slice 1: 1/4 pods running; pod x unschedulable")},
		{"one slice failing fails the job", []resourcemanager.Observation{o(running, "4/4 pods running"), o(failed, "pod p terminated: Error (exit code 1)")},
			o(failed, "slice 1 of 2: pod p terminated: Error (exit code 1)")},
		{"a failure wins over a missing slice", []resourcemanager.Observation{o(unknown, "gone"), o(failed, "boom")},
			o(failed, "slice 1 of 2: boom")},
		{"a slice deleted outside Falcon", []resourcemanager.Observation{o(unknown, "Kubernetes Job ns/j-s0 is gone"), o(running, "4/4 pods running")},
			o(unknown, "slice 0 of 2: Kubernetes Job ns/j-s0 is gone")},
		{"one slice done, the other still running", []resourcemanager.Observation{o(succeeded, "4/4 pods succeeded"), o(running, "4/4 pods running")},
			o(running, "2/2 slices running (1 succeeded)")},
		{"every slice done", []resourcemanager.Observation{o(succeeded, "x"), o(succeeded, "x"), o(succeeded, "x")},
			o(succeeded, "3/3 slices succeeded")},
		{"none yet", []resourcemanager.Observation{o(pending, "0/4 pods running"), o(pending, "0/4 pods running")},
			o(pending, "0/2 slices running; slice 0: 0/4 pods running")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ObserveSlices(tt.slices); got != tt.want {
				t.Errorf("ObserveSlices = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// A Job is finished, for the sweep, once its controller says it ended, and
// only then: a Job still starting or running may hold accelerators.
func TestFinished(t *testing.T) {
	cond := func(typ batchv1.JobConditionType, st corev1.ConditionStatus) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: st}
	}
	for _, tc := range []struct {
		name  string
		conds []batchv1.JobCondition
		want  bool
	}{
		{"no condition: starting or running", nil, false},
		{"suspended", []batchv1.JobCondition{cond(batchv1.JobSuspended, corev1.ConditionTrue)}, false},
		{"complete", []batchv1.JobCondition{cond(batchv1.JobComplete, corev1.ConditionTrue)}, true},
		{"success criteria met", []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue)}, true},
		{"failed", []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue)}, true},
		{"failure target: its pods are being ended", []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue)}, true},
		{"a condition that is false", []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionFalse)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &batchv1.Job{Status: batchv1.JobStatus{Conditions: tc.conds}}
			if got := finished(j); got != tc.want {
				t.Fatalf("finished = %t, want %t", got, tc.want)
			}
		})
	}
}
