package podexec

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInRank(t *testing.T) {
	pod := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labels}}
	}
	index := func(i string) map[string]string {
		return map[string]string{"batch.kubernetes.io/job-completion-index": i}
	}
	withFirst := func(l map[string]string, first string) map[string]string {
		l["falcon.dev/first-rank"] = first
		return l
	}
	cmd := []string{"sh", "-c", "echo $FALCON_RANK"}
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"one slice: the container's rank is the rank", pod(index("3")), cmd},
		{"the first slice: its index is its rank", pod(withFirst(index("1"), "0")), cmd},
		{"a later slice: the rank is set for the command", pod(withFirst(index("1"), "4")),
			append([]string{"/bin/sh", "-c", `export FALCON_RANK=5 JAX_PROCESS_ID=5; exec "$0" "$@"`}, cmd...)},
		{"a first rank that is not a number is left alone", pod(withFirst(index("1"), "x")), cmd},
		{"no index: nothing to add to", pod(withFirst(map[string]string{}, "4")), cmd},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := InRank(tt.pod, cmd); !slices.Equal(got, tt.want) {
				t.Errorf("InRank = %q, want %q", got, tt.want)
			}
		})
	}
}
