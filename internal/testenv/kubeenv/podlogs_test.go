package kubeenv_test

import (
	"bufio"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// TestPodLogs reads a pod's log through the apiserver's pods/log, which
// proxies to kwok's server over TLS verified by the cluster CA: a plain
// read with timestamps, a 40 KiB line written as partial records and served
// whole, and a followed stream that sees a line appended after it opened.
func TestPodLogs(t *testing.T) {
	c := kubeenv.Start(t, kubeenv.WithPodLogs())
	ctx := testContext(t)
	if c.KubeletPort() == 0 {
		t.Fatal("KubeletPort() = 0 on a cluster started WithPodLogs")
	}
	nodes, err := c.AddNodes(ctx, 1, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := nodes[0].Status.DaemonEndpoints.KubeletEndpoint.Port; int(got) != c.KubeletPort() {
		t.Errorf("node kubelet port %d, want %d", got, c.KubeletPort())
	}
	ns := namespace(t, c)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{kubeenv.AnnotationRunForever: "true"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "falcon.test/trainer:v1"}},
		},
	}
	pods := c.Clientset().CoreV1().Pods(ns)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod Running", func() (bool, error) {
		p, err := pods.Get(ctx, "p", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})

	file := filepath.Join(t.TempDir(), "p.log")
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	long := strings.Repeat("x", 40*1024)
	if err := kubeenv.AppendPodLog(file, t0, "hello", long); err != nil {
		t.Fatal(err)
	}
	if err := c.ServePodLogs(ctx, ns, "p", "main", file); err != nil {
		t.Fatal(err)
	}

	got, err := pods.GetLogs("p", &corev1.PodLogOptions{Container: "main", Timestamps: true}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stamp := t0.Format(time.RFC3339Nano)
	if want := stamp + " hello\n" + stamp + " " + long + "\n"; string(got) != want {
		t.Errorf("log = %.200q..., want %.200q...", got, want)
	}

	stream, err := pods.GetLogs("p", &corev1.PodLogOptions{Container: "main", Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	r := bufio.NewReader(stream)
	for _, want := range []string{"hello", long} {
		if line, err := r.ReadString('\n'); err != nil || line != want+"\n" {
			t.Fatalf("followed line %.80q, %v; want %.80q", line, err, want)
		}
	}
	if err := kubeenv.AppendPodLog(file, t0.Add(time.Second), "later"); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "later\n" {
		t.Fatalf("followed line after append %q, %v; want \"later\\n\"", line, err)
	}
}
