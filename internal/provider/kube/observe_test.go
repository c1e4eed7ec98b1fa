package kube

import (
	"strings"
	"testing"

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
		{"oom", jobWith(batchv1.JobFailed), []*corev1.Pod{pod("a", corev1.PodFailed, terminated("OOMKilled", 137))}, 1, resourcemanager.PhaseFailed, []string{"OOMKilled", "exit code 137"}},
		{"image pull", jobWith(), []*corev1.Pod{pod("a", corev1.PodPending, waiting("ImagePullBackOff", "Back-off pulling image \"nope\""))}, 1, resourcemanager.PhaseFailed, []string{"ImagePullBackOff", "nope"}},
		{"job failed without pods", jobWith(batchv1.JobFailed), nil, 1, resourcemanager.PhaseFailed, []string{"Job failed", "BackoffLimitExceeded"}},
		{"exit zero while others run", jobWith(), []*corev1.Pod{pod("a", corev1.PodSucceeded, terminated("Completed", 0)), pod("b", corev1.PodRunning)}, 2, resourcemanager.PhasePending, []string{"1/2"}},
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
