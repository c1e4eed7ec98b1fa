package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/testenv/gcstest"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// On a Kubernetes edge cluster with a bucket, what a job writes lands in
// the bucket (GCS FUSE on GKE; the test writes the objects the way the
// mount would, since kwok runs no containers) and its output is served by
// the pod log API while the pods live and from the bucket once they are
// gone. Every read goes through the API server: the CLI has no
// credentials for the cluster or the bucket.
func TestKubernetesResults(t *testing.T) {
	ctx := context.Background()
	c := kubeenv.Start(t, kubeenv.WithPodLogs())
	if _, err := c.CreateNamespace(ctx, kubeNamespace); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddNodes(ctx, 1, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	gcs := gcstest.Start(t, "", "edge-results")
	d := startDevEnv(t, "", []string{"STORAGE_EMULATOR_HOST=" + strings.TrimPrefix(gcs.URL(), "http://")})

	clusters := fmt.Sprintf("clusters:\n  %s:\n    provider: kubernetes\n    kubeconfig: %s\n    context: %s\n    default_namespace: %s\n    gcs_bucket: gs://edge-results\n",
		c.Name(), c.KubeconfigPath(), c.Context(), kubeNamespace)
	f := filepath.Join(t.TempDir(), "clusters.yaml")
	writeFile(t, f, clusters)
	if r := d.run("", "cluster", "apply", "-f", f); r.code != 0 {
		t.Fatalf("cluster apply: %d %s", r.code, r.stderr)
	}
	manifest := fmt.Sprintf(`name: kube-results
cluster_name: %s
metrics:
  - {name: step_time, pattern: 'step_time=(?P<value>[0-9.]+)', better: lower}
role_to_task_spec:
  main:
    command: python train.py
    image: falcon.test/trainer:v1
    replica: 2
    envs: {FALCON_TEST_RUN_FOREVER: "true"}
`, c.Name())
	exp := d.create(manifest)
	id := exp["id"].(string)
	jobID := jobsOf(exp)[0]["id"].(string)
	art := exp["artifact"].(map[string]any)
	wantPath := "gs://edge-results/experiments/" + id + "/artifacts/" + art["id"].(string) + "/"
	if exp["artifact_path"] != wantPath {
		t.Errorf("artifact path %v; want the cluster bucket's %s", exp["artifact_path"], wantPath)
	}
	d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })

	// The pods' output, through the real apiserver's pods/log.
	logDir := t.TempDir()
	t0 := time.Now().UTC().Truncate(time.Second)
	for rank := range 2 {
		pod := podOf(t, c, jobID, rank)
		file := filepath.Join(logDir, pod+".log")
		if err := c.ServePodLogs(ctx, kubeNamespace, pod, "task", file); err != nil {
			t.Fatal(err)
		}
		var lines []string
		for i := range 3 {
			lines = append(lines, fmt.Sprintf("rank %d line %d step_time=0.%d", rank, i, i+1))
		}
		if err := kubeenv.AppendPodLog(file, t0, lines...); err != nil {
			t.Fatal(err)
		}
	}
	r := d.run("", "exp", "logs", id, "-o", "table")
	for rank := range 2 {
		for i := range 3 {
			if want := fmt.Sprintf("[main/%d] rank %d line %d", rank, rank, i); !strings.Contains(r.stdout, want) {
				t.Errorf("exp logs lacks %q:\n%s\n%s", want, r.stdout, r.stderr)
			}
		}
	}
	// The last line carries the resume token (one per batch), and resuming
	// with it sends nothing again.
	js := d.run("", "exp", "logs", id, "-o", "json")
	jl := strings.Split(strings.TrimSpace(js.stdout), "\n")
	var last struct{ Resume string }
	if err := json.Unmarshal([]byte(jl[len(jl)-1]), &last); err != nil || last.Resume == "" || len(jl) != 6 {
		t.Fatalf("logs -o json: %d lines, last %q: %v", len(jl), jl[len(jl)-1], err)
	}
	resp, err := http.Get("http://" + d.http + "/v1/experiments/" + id + "/logs?resume=" + url.QueryEscape(last.Resume))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(again), `"line"`) {
		t.Errorf("resumed after the last line: %d %s; want no lines", resp.StatusCode, again)
	}
	if r := d.run("", "exp", "logs", id, "--rank", "1", "--grep", "line [12]", "--timestamps", "-o", "table"); strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, t0.Format("2006-01-02T15:04:05")) {
		t.Errorf("logs --rank 1 --grep --timestamps:\n%s%s", r.stdout, r.stderr)
	}

	// Files, written as the GCS FUSE mount would.
	o := blobstore.NewOpener(blobstore.WithGCSOptions(gcs.ClientOptions()...))
	defer o.Close()
	loc, _ := blobstore.Parse("artifact", wantPath)
	files := map[string][]byte{
		"metrics.jsonl":        []byte(`{"step": 1, "loss": 2.5}` + "\n" + `{"step": 2, "loss": 1.5}` + "\n"),
		"profiles/trace 1.pb":  bytes.Repeat([]byte{0, 1, 2, 3}, 1<<18),
		".falcon/config.yaml":  []byte("model: x\n"),
		"empty":                {},
		"nested/ü/deep/f.json": []byte("{}"),
	}
	for p, b := range files {
		w, err := o.Writer(ctx, loc, p, "")
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if l := d.ls(id); len(l.Items) != 4 || l.Complete {
		t.Errorf("ls while running: %d files, complete=%v; want 4 (.falcon hidden), not complete", len(l.Items), l.Complete)
	}
	if l := d.ls(id, "--all"); len(l.Items) != 5 {
		t.Errorf("ls --all: %d files", len(l.Items))
	}
	if r := d.run("", "artifact", "cat", id, "profiles/trace 1.pb"); r.code != 0 || r.stdout != string(files["profiles/trace 1.pb"]) {
		t.Errorf("cat from the bucket: exit %d, %d bytes (%s)", r.code, len(r.stdout), r.stderr)
	}
	dir := t.TempDir()
	if r := d.run("", "artifact", "get", id, "--all", "--to", dir); r.code != 0 {
		t.Fatalf("get: %d %s", r.code, r.stderr)
	}
	for p, b := range files {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("get %q: %d bytes, %v", p, len(got), err)
		}
	}

	// Abort; the pods' logs go to the bucket (the task's log wrapper on GKE)
	// and the pods go away: logs now come from the bucket.
	if r := d.run("", "exp", "abort", id, "--yes"); r.code != 0 {
		t.Fatalf("abort: %d %s", r.code, r.stderr)
	}
	d.waitFor(id, "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })
	logs := blobstore.Location{Scheme: "gs", Bucket: "edge-results", Prefix: "logs/" + jobID + "/"}
	for rank := range 2 {
		w, _ := o.Writer(ctx, logs, fmt.Sprintf("%s-%d.log", jobID, rank), "")
		fmt.Fprintf(w, "rank %d kept in the bucket\nstep_time=0.9\n", rank)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Clientset().CoreV1().Pods(kubeNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + jobID}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "pods gone", func() bool {
		pods, err := c.Clientset().CoreV1().Pods(kubeNamespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + jobID})
		return err == nil && len(pods.Items) == 0
	})
	r = d.run("", "exp", "logs", id, "-o", "table")
	if !strings.Contains(r.stdout, "[main/0] rank 0 kept in the bucket") || !strings.Contains(r.stdout, "[main/1] rank 1 kept in the bucket") {
		t.Errorf("logs after the pods are gone:\n%s\n%s", r.stdout, r.stderr)
	}
	ex := d.mustJSON("exp", "logs", "export", id, "--to", "gs://edge-results/exports/run-1")
	if ex["total_lines"] != "4" || len(ex["ranks"].([]any)) != 2 || ex["meta_object"] != "gs://edge-results/exports/run-1/collection_meta.json" {
		t.Errorf("export: %v", ex)
	}
	exported := blobstore.Location{Scheme: "gs", Bucket: "edge-results", Prefix: "exports/run-1/"}
	for rank := range 2 {
		rd, _, err := o.Open(ctx, exported, fmt.Sprintf("main-rank-%d.log", rank), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rd)
		rd.Close()
		if want := fmt.Sprintf("rank %d kept in the bucket\nstep_time=0.9\n", rank); string(got) != want {
			t.Errorf("exported rank %d: %q; want %q", rank, got, want)
		}
	}
	// Not complete yet: Falcon gives stopped pods a grace period to write
	// (as the log objects above were), and until it has passed the listing
	// and the metrics are read as they may still grow.
	if l := d.ls(id); l.Complete || len(l.Items) != 4 {
		t.Errorf("ls after abort: complete=%v %d files; want 4, not complete within the pods' grace period", l.Complete, len(l.Items))
	}
	m := d.mustJSON("exp", "metrics", id)
	if len(m["metrics"].([]any)) != 2 {
		t.Errorf("metrics from the bucket's file and rank 0's log object, written while the pods terminated: %v", m)
	}
}

func podOf(t *testing.T, c *kubeenv.Cluster, jobID string, rank int) string {
	t.Helper()
	var name string
	waitUntil(t, 30*time.Second, fmt.Sprintf("pod of rank %d", rank), func() bool {
		pods, err := c.Clientset().CoreV1().Pods(kubeNamespace).List(context.Background(), metav1.ListOptions{
			LabelSelector: fmt.Sprintf("batch.kubernetes.io/job-name=%s,batch.kubernetes.io/job-completion-index=%d", jobID, rank)})
		if err != nil || len(pods.Items) == 0 || pods.Items[0].Spec.NodeName == "" {
			return false
		}
		name = pods.Items[0].Name
		return true
	})
	return name
}
