package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// A two-slice v7x job on a Kubernetes edge cluster, through the CLI: a Job
// per slice, ranks counted across slices for exec, and an abort that
// stops both slices.
func TestKubernetesMultislice(t *testing.T) {
	ctx := context.Background()
	c := kubeenv.Start(t, kubeenv.WithPodExec())
	if _, err := c.CreateNamespace(ctx, kubeNamespace); err != nil {
		t.Fatal(err)
	}
	taints := []corev1.Taint{{Key: "google.com/tpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	capacity := corev1.ResourceList{"google.com/tpu": resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}
	if _, err := c.AddNodes(ctx, 2, map[string]string{
		"cloud.google.com/gke-tpu-accelerator": "tpu7x", "cloud.google.com/gke-tpu-topology": "2x2x1",
	}, taints, capacity); err != nil {
		t.Fatal(err)
	}
	d := startDev(t, "")
	applyClusters(t, d, c)
	exp := d.create(tpuManifest("multislice", "2x2x1", 1, map[string]string{"FALCON_TEST_RUN_FOREVER": "true"}, "") + "    slices: 2\n")
	id, job := exp["id"].(string), jobsOf(exp)[0]["id"].(string)
	d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
	if n := kubeJobs(t, c, job); n != 2 {
		t.Fatalf("%d Kubernetes Jobs, want one per slice", n)
	}

	// Each slice's one host is a rank: slice 1's is rank 1. Each
	// "container" holds what the downward API gives a real one, the index
	// within its slice, and the command exec'd there sees its rank.
	pods := map[int]string{}
	for s := range 2 {
		pod := slicePod(t, c, job, s)
		if err := c.ServePodExec(ctx, kubeNamespace, pod, "task", t.TempDir(), map[string]string{"POD": pod, "FALCON_RANK": "0", "JAX_PROCESS_ID": "0"}); err != nil {
			t.Fatal(err)
		}
		pods[s] = pod
	}
	for rank, pod := range pods {
		r := d.run("", "exp", "exec", id, "--rank", strconv.Itoa(rank), "--", "sh", "-c", "echo $POD $FALCON_RANK $JAX_PROCESS_ID")
		if want := fmt.Sprintf("%s %d %d\n", pod, rank, rank); r.code != 0 || r.stdout != want {
			t.Errorf("exec --rank %d: exit %d stdout %q stderr %q; want slice %d's pod and rank, %q", rank, r.code, r.stdout, r.stderr, rank, want)
		}
	}
	if r := d.run("", "exp", "exec", id, "--rank", "2", "--", "true"); r.code != 2 || !strings.Contains(r.stderr, "slices") {
		t.Errorf("exec --rank 2 of a 2-rank job: exit %d %s; want 2 naming the slices", r.code, r.stderr)
	}

	if r := d.run("", "exp", "abort", id, "--yes"); r.code != 0 {
		t.Fatalf("abort: %d %s", r.code, r.stderr)
	}
	d.waitFor(id, "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })
	deadline := time.Now().Add(30 * time.Second)
	for kubeJobs(t, c, job) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d Kubernetes Jobs left after the abort, want both slices stopped", kubeJobs(t, c, job))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// slicePod waits for the running pod of a slice of the job.
func slicePod(t testing.TB, c *kubeenv.Cluster, jobID string, slice int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pods, err := c.Clientset().CoreV1().Pods(kubeNamespace).List(context.Background(), metav1.ListOptions{
			LabelSelector: fmt.Sprintf("falcon.dev/job-id=%s,falcon.dev/slice=%d", jobID, slice)})
		if err == nil && len(pods.Items) > 0 && pods.Items[0].Status.Phase == corev1.PodRunning {
			return pods.Items[0].Name
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running pod of slice %d of job %s: %v", slice, jobID, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
