package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

const kubeNamespace = "falcon-jobs"

// edge starts a real edge cluster with TPU-like v7x nodes of one host
// (2x2x1) and of two hosts (2x2x2).
func edge(t testing.TB) *kubeenv.Cluster {
	t.Helper()
	c := kubeenv.Start(t)
	ctx := context.Background()
	if _, err := c.CreateNamespace(ctx, kubeNamespace); err != nil {
		t.Fatal(err)
	}
	for _, topo := range []string{"2x2x1", "2x2x2"} {
		addTPUNodes(t, c, 2, topo)
	}
	return c
}

// addTPUNodes adds n v7x hosts of slices of topology topo to c.
func addTPUNodes(t testing.TB, c *kubeenv.Cluster, n int, topo string) {
	t.Helper()
	taints := []corev1.Taint{{Key: "google.com/tpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	capacity := corev1.ResourceList{"google.com/tpu": resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("200"),
		corev1.ResourceMemory: resource.MustParse("800Gi"), corev1.ResourcePods: resource.MustParse("110")}
	if _, err := c.AddNodes(context.Background(), n, map[string]string{
		"cloud.google.com/gke-tpu-accelerator": "tpu7x",
		"cloud.google.com/gke-tpu-topology":    topo,
	}, taints, capacity); err != nil {
		t.Fatal(err)
	}
}

// jobPods lists the pods of a Falcon job on c.
func jobPods(t *testing.T, c *kubeenv.Cluster, jobID string) []corev1.Pod {
	t.Helper()
	pods, err := c.Clientset().CoreV1().Pods(kubeNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "falcon.dev/job-id=" + jobID})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// completion waits for the Kubernetes Job of a Falcon job to complete on
// c and returns its completion time.
func completion(t *testing.T, c *kubeenv.Cluster, jobID string) time.Time {
	t.Helper()
	var at time.Time
	eventually(t, "the Kubernetes Job's completion", func() bool {
		list, err := c.Clientset().BatchV1().Jobs(kubeNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "falcon.dev/job-id=" + jobID})
		if err != nil || len(list.Items) != 1 || list.Items[0].Status.CompletionTime == nil {
			return false
		}
		at = list.Items[0].Status.CompletionTime.Time
		return true
	})
	return at
}

// applyClusters registers the edge clusters with Falcon through the CLI.
func applyClusters(t testing.TB, d *dev, edges ...*kubeenv.Cluster) {
	t.Helper()
	var b strings.Builder
	b.WriteString("clusters:\n")
	for _, e := range edges {
		fmt.Fprintf(&b, "  %s:\n    provider: kubernetes\n    kubeconfig: %s\n    context: %s\n    default_namespace: %s\n    accelerator_types:\n      - type: v7x\n        device_class: tpu\n        priority: 1\n",
			e.Name(), e.KubeconfigPath(), e.Context(), kubeNamespace)
	}
	f := filepath.Join(t.TempDir(), "clusters.yaml")
	os.WriteFile(f, []byte(b.String()), 0o644)
	if r := d.run("", "cluster", "apply", "-f", f); r.code != 0 {
		t.Fatalf("cluster apply: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// tpuManifest is a v7x experiment; behaviour is steered by env vars that the
// test clusters' kwok stages read (duration, exit code, OOM, run forever).
func tpuManifest(name, topo string, replica int, envs map[string]string, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\n%srole_to_task_spec:\n  main:\n    command: python train.py\n    image: falcon.test/trainer:v1\n    device_type: v7x\n    device_topo: %s\n    replica: %d\n", name, extra, topo, replica)
	if len(envs) > 0 {
		b.WriteString("    envs:\n")
		for k, v := range envs {
			fmt.Fprintf(&b, "      %s: %q\n", k, v)
		}
	}
	return b.String()
}

// execKubeconfig writes a kubeconfig for c whose credential comes from an
// exec plugin issuing tokens that expire after two seconds, counting its
// runs in a file: client-go must run it again whenever the token expires.
func execKubeconfig(t *testing.T, c *kubeenv.Cluster) (path, counter string) {
	t.Helper()
	dir := t.TempDir()
	counter = filepath.Join(dir, "issued")
	cfg := c.RESTConfig()
	plugin := filepath.Join(dir, "token.sh")
	script := fmt.Sprintf(`#!/bin/sh
echo x >> %q
exp=$(date -u -d '+2 seconds' +%%Y-%%m-%%dT%%H:%%M:%%SZ)
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%%s","expirationTimestamp":"%%s"}}' %q "$exp"
`, counter, cfg.BearerToken)
	if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.crt")
	os.WriteFile(ca, cfg.CAData, 0o644)
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: edge
  cluster: {server: %q, certificate-authority: %q}
users:
- name: rotating
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: %q, interactiveMode: Never}
contexts:
- name: rotating
  context: {cluster: edge, user: rotating}
current-context: rotating
`, cfg.Host, ca, plugin)
	path = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, counter
}

func kubeJobs(t *testing.T, c *kubeenv.Cluster, jobID string) int {
	t.Helper()
	list, err := c.Clientset().BatchV1().Jobs(kubeNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "falcon.dev/job-id=" + jobID})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func TestKubernetesEdgeClusters(t *testing.T) {
	a, b := edge(t), edge(t)
	top := t
	var d *dev
	d0 := startDev(t, "")
	applyClusters(t, d0, a, b)
	clusters := map[string]*kubeenv.Cluster{a.Name(): a, b.Name(): b}
	jobOf := func(exp map[string]any) map[string]any { return jobsOf(exp)[0] }
	edgeOf := func(exp map[string]any) *kubeenv.Cluster {
		c := clusters[jobOf(exp)["cluster_name"].(string)]
		if c == nil {
			t.Fatalf("job ran on no known edge cluster: %v", jobOf(exp))
		}
		return c
	}
	final := func(e map[string]any) bool {
		s := e["status"]
		return s == "Succeeded" || s == "Failed" || s == "Aborted"
	}

	run := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			d = d0.with(t)
			f(t)
		})
	}
	// restart starts falcon dev again on the killed one's data dir.
	restart := func(t *testing.T) *dev {
		d0 = startDev(top, d0.dataDir)
		return d0.with(t)
	}
	// startWhileDown creates an experiment on a shape no node offers, waits
	// until its job is unschedulable on its cluster, kills falcon dev, and
	// adds the hosts the job needs while no controller runs.
	startWhileDown := func(t *testing.T, name, topo string, replica int, envs map[string]string) (id, jobID string, c *kubeenv.Cluster) {
		exp := d.create(tpuManifest(name, topo, replica, envs, ""))
		id = exp["id"].(string)
		exp = d.waitFor(id, "unschedulable", func(e map[string]any) bool {
			return strings.Contains(jobOf(e)["message"].(string), "unschedulable")
		})
		c, jobID = edgeOf(exp), jobOf(exp)["id"].(string)
		d0.kill(syscall.SIGKILL)
		addTPUNodes(t, c, replica, topo)
		return id, jobID, c
	}
	run("single host succeeds", func(t *testing.T) {
		exp := d.create(tpuManifest("k-one", "2x2x1", 1, map[string]string{"FALCON_TEST_DURATION": "1s"}, ""))
		exp = d.waitFor(exp["id"].(string), "final", final)
		if exp["status"] != "Succeeded" {
			t.Fatalf("exp %v: %v", exp["status"], jobOf(exp))
		}
		if n := kubeJobs(t, edgeOf(exp), jobOf(exp)["id"].(string)); n != 1 {
			t.Fatalf("%d Kubernetes Jobs for one Falcon job", n)
		}
	})
	run("multi host succeeds with a headless service", func(t *testing.T) {
		exp := d.create(tpuManifest("k-two", "2x2x2", 2, map[string]string{"FALCON_TEST_DURATION": "1s"}, ""))
		id := exp["id"].(string)
		exp = d.waitFor(id, "final", final)
		if exp["status"] != "Succeeded" {
			t.Fatalf("exp %v: %v", exp["status"], jobOf(exp))
		}
	})
	run("exit code", func(t *testing.T) {
		exp := d.create(tpuManifest("k-exit", "2x2x1", 1, map[string]string{"FALCON_TEST_EXIT_CODE": "3"}, ""))
		exp = d.waitFor(exp["id"].(string), "final", final)
		j := jobOf(exp)
		if exp["status"] != "Failed" || j["reason"] != "JobFailed" || !strings.Contains(j["message"].(string), "exit code 3") {
			t.Fatalf("job %v", j)
		}
	})
	run("oom killed", func(t *testing.T) {
		exp := d.create(tpuManifest("k-oom", "2x2x1", 1, map[string]string{"FALCON_TEST_OOM_KILLED": "true"}, ""))
		exp = d.waitFor(exp["id"].(string), "final", final)
		if j := jobOf(exp); !strings.Contains(j["message"].(string), "OOMKilled (exit code 137: killed by SIGKILL)") {
			t.Fatalf("job %v", j)
		}
	})
	run("unschedulable waits with the scheduler's reason, then aborts", func(t *testing.T) {
		// No node offers a 2x2x4 slice.
		exp := d.create(tpuManifest("k-nowhere", "2x2x4", 4, map[string]string{"FALCON_TEST_RUN_FOREVER": "true"}, ""))
		id := exp["id"].(string)
		exp = d.waitFor(id, "unschedulable", func(e map[string]any) bool {
			return strings.Contains(jobOf(e)["message"].(string), "unschedulable")
		})
		if j := jobOf(exp); j["status"] != "Pending" || j["reason"] != "Dispatching" {
			t.Fatalf("job %v", j)
		}
		c, jobID := edgeOf(exp), jobOf(exp)["id"].(string)
		d.run("", "exp", "abort", id, "--yes")
		d.waitFor(id, "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })
		if n := kubeJobs(t, c, jobID); n != 0 {
			t.Fatalf("aborted job left %d Kubernetes Jobs", n)
		}
	})
	run("abort while running deletes the job and its pods", func(t *testing.T) {
		exp := d.create(tpuManifest("k-forever", "2x2x1", 1, map[string]string{"FALCON_TEST_RUN_FOREVER": "true"}, ""))
		id := exp["id"].(string)
		exp = d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
		c, jobID := edgeOf(exp), jobOf(exp)["id"].(string)
		d.run("", "exp", "abort", id, "--yes")
		d.waitFor(id, "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })
		if n := kubeJobs(t, c, jobID); n != 0 {
			t.Fatalf("aborted job left %d Kubernetes Jobs", n)
		}
	})
	run("a forced abort ends at once, and its Job is removed all the same", func(t *testing.T) {
		exp := d.create(tpuManifest("k-forced", "2x2x1", 1, map[string]string{"FALCON_TEST_RUN_FOREVER": "true"}, ""))
		id := exp["id"].(string)
		exp = d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
		c, jobID := edgeOf(exp), jobOf(exp)["id"].(string)
		if r := d.run("", "exp", "abort", id, "--force", "--yes", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"Aborted"`) {
			t.Fatalf("exp abort --force: %d %s %s", r.code, r.stdout, r.stderr)
		}
		// The forced abort asked the cluster nothing; the manager sees the
		// job end under it and stops what it left there.
		eventually(t, "the forced abort's Kubernetes Job removed", func() bool { return kubeJobs(t, c, jobID) == 0 })
	})
	run("timeout", func(t *testing.T) {
		exp := d.create(tpuManifest("k-slow", "2x2x1", 1, map[string]string{"FALCON_TEST_RUN_FOREVER": "true"}, "timeout_seconds: 3\n"))
		exp = d.waitFor(exp["id"].(string), "final", final)
		if j := jobOf(exp); exp["status"] != "Failed" || j["reason"] != "Timeout" {
			t.Fatalf("job %v", j)
		}
		if n := kubeJobs(t, edgeOf(exp), jobOf(exp)["id"].(string)); n != 0 {
			t.Fatalf("timed-out job left %d Kubernetes Jobs", n)
		}
	})
	run("offline cluster receives nothing new", func(t *testing.T) {
		for _, c := range []*kubeenv.Cluster{a, b} {
			if r := d.run("", "cluster", "set-status", c.Name(), "offline"); r.code != 0 {
				t.Fatalf("set-status: %s", r.stderr)
			}
		}
		exp := d.create(tpuManifest("k-offline", "2x2x1", 1, nil, ""))
		id := exp["id"].(string)
		exp = d.waitFor(id, "waiting", func(e map[string]any) bool {
			return strings.Contains(jobOf(e)["message"].(string), "no active cluster")
		})
		d.run("", "cluster", "set-status", a.Name(), "active")
		exp = d.waitFor(id, "final", final)
		if exp["status"] != "Succeeded" || jobOf(exp)["cluster_name"] != a.Name() {
			t.Fatalf("after reactivation: %v on %v", exp["status"], jobOf(exp)["cluster_name"])
		}
		d.run("", "cluster", "set-status", b.Name(), "active")
	})
	run("short-lived credentials are refreshed", func(t *testing.T) {
		kc, counter := execKubeconfig(t, a)
		if r := d.run("", "cluster", "create", "--name", "rotating", "--backend", "kubernetes", "--kubeconfig", kc,
			"--context", "rotating", "--namespace", kubeNamespace, "--accelerator", "v7x"); r.code != 0 {
			t.Fatalf("cluster create: %d %s", r.code, r.stderr)
		}
		defer d.run("", "cluster", "set-status", "rotating", "offline")
		exp := d.create(tpuManifest("k-rotating", "2x2x1", 1, map[string]string{"FALCON_TEST_RUN_FOREVER": "true"}, "cluster_name: rotating\n"))
		id := exp["id"].(string)
		exp = d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
		jobID := jobOf(exp)["id"].(string)
		// Let the token expire, then make Falcon talk to the cluster again:
		// the abort's deletes must go out with a fresh token.
		time.Sleep(3 * time.Second)
		d.run("", "exp", "abort", id, "--yes")
		d.waitFor(id, "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })
		if n := kubeJobs(t, a, jobID); n != 0 {
			t.Fatalf("abort with a refreshed token left %d Kubernetes Jobs", n)
		}
		raw, _ := os.ReadFile(counter)
		if n := strings.Count(string(raw), "x"); n < 2 {
			t.Fatalf("the credential plugin ran %d times; the expired token was not refreshed", n)
		}
	})
	run("controller restart mid-run", func(t *testing.T) {
		exp := d.create(tpuManifest("k-restart", "2x2x1", 1, map[string]string{"FALCON_TEST_DURATION": "6s"}, ""))
		id := exp["id"].(string)
		exp = d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
		c, jobID := edgeOf(exp), jobOf(exp)["id"].(string)
		d0.kill(syscall.SIGKILL)
		d2 := restart(t)
		exp = d2.waitFor(id, "final", final)
		if exp["status"] != "Succeeded" {
			t.Fatalf("after restart: %v %v", exp["status"], jobOf(exp))
		}
		if n := kubeJobs(t, c, jobID); n != 1 {
			t.Fatalf("%d Kubernetes Jobs after a restart, want exactly 1", n)
		}
	})
	run("a job that ends while the controller is down ends when the cluster says", func(t *testing.T) {
		exp := d.create(tpuManifest("k-missed", "2x2x1", 1, map[string]string{"FALCON_TEST_DURATION": "2s"}, ""))
		id := exp["id"].(string)
		exp = d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
		c, jobID := edgeOf(exp), jobOf(exp)["id"].(string)
		d0.kill(syscall.SIGKILL)
		completed := completion(t, c, jobID)
		d2 := restart(t)
		exp = d2.waitFor(id, "final", final)
		if exp["status"] != "Succeeded" {
			t.Fatalf("after restart: %v %v", exp["status"], jobOf(exp))
		}
		// The cluster dates in whole seconds; Falcon keeps a finish no
		// earlier than the start it recorded itself.
		started, finished := timeField(t, jobOf(exp), "started_at"), timeField(t, jobOf(exp), "finished_at")
		if want := maxTime(completed, started); !finished.Equal(want) {
			t.Errorf("job finished_at %v, want the Job's completion %v (started %v)", finished, completed, started)
		}
		if got := timeField(t, exp, "finished_at"); !got.Equal(finished) {
			t.Errorf("experiment finished_at %v, want its job's %v", got, finished)
		}
	})
	run("a job that starts while the controller is down started when the cluster says", func(t *testing.T) {
		id, jobID, c := startWhileDown(t, "k-late", "2x2x4", 4, map[string]string{"FALCON_TEST_RUN_FOREVER": "true"})
		var began time.Time
		eventually(t, "every pod of the job running", func() bool {
			pods := jobPods(t, c, jobID)
			if len(pods) != 4 {
				return false
			}
			began = time.Time{}
			for _, p := range pods {
				if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
					return false
				}
				began = maxTime(began, p.Status.ContainerStatuses[0].State.Running.StartedAt.Time)
			}
			return true
		})
		d2 := restart(t)
		exp := d2.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
		if got := timeField(t, jobOf(exp), "started_at"); !got.Equal(began) {
			t.Errorf("job started_at %v, want its last container's start %v", got, began)
		}
		if got := timeField(t, exp, "started_at"); !got.Equal(began) {
			t.Errorf("experiment started_at %v, want its job's start %v", got, began)
		}
		d2.run("", "exp", "abort", id, "--yes")
		d2.waitFor(id, "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })
	})
	run("a job that runs and ends while the controller is down keeps both times", func(t *testing.T) {
		id, jobID, c := startWhileDown(t, "k-unseen", "2x4x4", 8, map[string]string{"FALCON_TEST_DURATION": "2s"})
		completed := completion(t, c, jobID)
		var began time.Time
		for _, p := range jobPods(t, c, jobID) {
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
				t.Fatalf("pod %s of a completed Job: %+v", p.Name, p.Status.ContainerStatuses)
			}
			began = maxTime(began, p.Status.ContainerStatuses[0].State.Terminated.StartedAt.Time)
		}
		d2 := restart(t)
		exp := d2.waitFor(id, "final", final)
		if exp["status"] != "Succeeded" {
			t.Fatalf("after restart: %v %v", exp["status"], jobOf(exp))
		}
		started, finished := timeField(t, jobOf(exp), "started_at"), timeField(t, jobOf(exp), "finished_at")
		if !started.Equal(began) || !finished.Equal(maxTime(completed, began)) {
			t.Errorf("job ran %v to %v, want its pods' last start %v to the Job's completion %v", started, finished, began, completed)
		}
	})
	run("edge apiserver restarted under a running job", func(t *testing.T) {
		exp := d.create(tpuManifest("k-apiserver", "2x2x1", 1, map[string]string{"FALCON_TEST_DURATION": "8s"}, ""))
		id := exp["id"].(string)
		exp = d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
		c := edgeOf(exp)
		c.StopAPIServer()
		time.Sleep(2 * time.Second)
		if err := c.StartAPIServer(context.Background()); err != nil {
			t.Fatal(err)
		}
		exp = d.waitFor(id, "final", final)
		if exp["status"] != "Succeeded" {
			t.Fatalf("after apiserver restart: %v %v", exp["status"], jobOf(exp))
		}
	})
}
