package kubeenv_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// PodRunTime reads a pod as kwok.yaml's Stages do.
func TestPodRunTime(t *testing.T) {
	env := func(kv ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for i := 0; i < len(kv); i += 2 {
			out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		env         []corev1.EnvVar
		restart     corev1.RestartPolicy
		want        time.Duration
		ends        bool
	}{
		{name: "default", restart: corev1.RestartPolicyNever, want: time.Second, ends: true},
		{name: "annotation", annotations: map[string]string{kubeenv.AnnotationDuration: "3s"}, restart: corev1.RestartPolicyNever, want: 3 * time.Second, ends: true},
		{name: "env", env: env("FALCON_TEST_DURATION", "2m"), restart: corev1.RestartPolicyOnFailure, want: 2 * time.Minute, ends: true},
		{name: "annotation over env", annotations: map[string]string{kubeenv.AnnotationDuration: "4s"}, env: env("FALCON_TEST_DURATION", "2m"), want: 4 * time.Second, ends: true},
		{name: "run forever", annotations: map[string]string{kubeenv.AnnotationRunForever: "true"}, restart: corev1.RestartPolicyNever},
		{name: "run forever by env", env: env("FALCON_TEST_RUN_FOREVER", "1")},
		{name: "restart always", restart: corev1.RestartPolicyAlways},
		{name: "restart always with an exit code", env: env("FALCON_TEST_EXIT_CODE", "3"), restart: corev1.RestartPolicyAlways, want: time.Second, ends: true},
		{name: "restart always OOMKilled", annotations: map[string]string{kubeenv.AnnotationOOMKilled: "true"}, restart: corev1.RestartPolicyAlways, want: time.Second, ends: true},
		{name: "unreadable duration", env: env("FALCON_TEST_DURATION", "soon")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations},
				Spec: corev1.PodSpec{
					RestartPolicy: tc.restart,
					Containers:    []corev1.Container{{Name: "main", Env: tc.env}},
				},
			}
			d, ends := kubeenv.PodRunTime(p)
			if d != tc.want || ends != tc.ends {
				t.Errorf("PodRunTime = %s, %v; want %s, %v", d, ends, tc.want, tc.ends)
			}
		})
	}
}
