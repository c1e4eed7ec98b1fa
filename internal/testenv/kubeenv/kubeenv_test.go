package kubeenv_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

var (
	tpuLabels = map[string]string{
		kubeenv.LabelGKETPUAccelerator: "tpu7x",
		kubeenv.LabelGKETPUTopology:    "2x2x1",
		kubeenv.LabelGKENodePool:       "falcon-xyz",
	}
	tpuTaint      = corev1.Taint{Key: string(kubeenv.ResourceTPU), Value: "present", Effect: corev1.TaintEffectNoSchedule}
	tpuToleration = corev1.Toleration{Key: string(kubeenv.ResourceTPU), Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule}
)

// TestCluster drives one edge cluster through what Falcon's Kubernetes
// backend relies on: TPU nodes, an indexed Job scheduled onto them and run to
// completion, failures with exit codes and OOM kills, an unschedulable pod,
// deletion of a running Job, and an apiserver restart under a running Job.
func TestCluster(t *testing.T) {
	c := kubeenv.Start(t)
	t.Logf("cluster %s started in %s", c.Name(), c.StartupTime().Round(time.Millisecond))
	ctx := testContext(t)

	begin := time.Now()
	nodes, err := c.AddNodes(ctx, 2, tpuLabels, []corev1.Taint{tpuTaint},
		corev1.ResourceList{kubeenv.ResourceTPU: resource.MustParse("4")})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("2 nodes Ready in %s", time.Since(begin).Round(time.Millisecond))
	tpuNodes := map[string]bool{}
	for _, n := range nodes {
		tpuNodes[n.Name] = true
		if got := n.Status.Allocatable[kubeenv.ResourceTPU]; got.Cmp(resource.MustParse("4")) != 0 {
			t.Errorf("node %s allocatable %s = %s, want 4", n.Name, kubeenv.ResourceTPU, got.String())
		}
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != tpuTaint.Key {
			t.Errorf("node %s taints = %v, want only %v", n.Name, n.Spec.Taints, tpuTaint)
		}
	}

	t.Run("kubeconfig", func(t *testing.T) {
		cfg, err := clientcmd.Load(c.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		if cfg.CurrentContext != c.Name() || cfg.Contexts[c.Name()] == nil {
			t.Fatalf("kubeconfig current context %q, contexts %v; want %q", cfg.CurrentContext, cfg.Contexts, c.Name())
		}
		rc, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath())
		if err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(rc)
		v, err := cs.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.Major != "1" || v.Minor != "37" {
			t.Errorf("server version %s.%s (%s), want 1.37", v.Major, v.Minor, v.GitVersion)
		}

		bad := c.RESTConfig()
		bad.BearerToken = "not-the-token"
		_, err = kubernetes.NewForConfigOrDie(bad).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) {
			t.Errorf("listing namespaces with a wrong token: %v, want 401 Unauthorized", err)
		}
	})

	// These share the cluster and its two TPU nodes: only the first asks for
	// TPUs; the others fit beside it.
	t.Run("jobs", func(t *testing.T) {
		t.Run("indexed TPU job completes", func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, c)
			j := newJob("train", 2, map[string]string{kubeenv.AnnotationDuration: "3s"})
			j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
			pod := &j.Spec.Template.Spec
			pod.NodeSelector = map[string]string{
				kubeenv.LabelGKETPUAccelerator: "tpu7x",
				kubeenv.LabelGKETPUTopology:    "2x2x1",
			}
			tpus := corev1.ResourceList{kubeenv.ResourceTPU: resource.MustParse("4")}
			pod.Containers[0].Resources = corev1.ResourceRequirements{Requests: tpus, Limits: tpus}

			seen := watchPods(t, c, ns, j.Name)
			createJob(t, c, ns, j)
			waitJobCondition(t, c, ns, j.Name, batchv1.JobComplete)

			running := seen.running()
			if len(running) != 2 {
				t.Fatalf("pods seen Running: %v, want 2", running)
			}
			onNode := map[string]bool{}
			for name, p := range running {
				if !tpuNodes[p.Spec.NodeName] {
					t.Errorf("pod %s ran on %q, not a TPU node", name, p.Spec.NodeName)
				}
				onNode[p.Spec.NodeName] = true
				if p.Status.PodIP == "" || p.Status.HostIP == "" {
					t.Errorf("pod %s Running without IPs: podIP %q hostIP %q", name, p.Status.PodIP, p.Status.HostIP)
				}
				if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil || !cs[0].Ready {
					t.Errorf("pod %s Running with container statuses %+v", name, cs)
				}
			}
			if len(onNode) != 2 {
				t.Errorf("pods shared a node (%v): each wants all 4 TPUs of one", onNode)
			}
			for _, p := range listPods(t, c, ns, j.Name) {
				if p.Status.Phase != corev1.PodSucceeded {
					t.Errorf("pod %s phase %s, want Succeeded", p.Name, p.Status.Phase)
				}
				if term := terminated(p); term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
					t.Errorf("pod %s terminated state %+v, want exit 0 Completed", p.Name, term)
				}
			}
		})

		t.Run("exit code fails the job", func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, c)
			j := newJob("crash", 1, map[string]string{kubeenv.AnnotationExitCode: "3"})
			createJob(t, c, ns, j)
			cond := waitJobCondition(t, c, ns, j.Name, batchv1.JobFailed)
			if cond.Reason != batchv1.JobReasonBackoffLimitExceeded {
				t.Errorf("Failed reason %q, want %q", cond.Reason, batchv1.JobReasonBackoffLimitExceeded)
			}
			pods := listPods(t, c, ns, j.Name)
			if len(pods) != 1 {
				t.Fatalf("%d pods, want 1", len(pods))
			}
			p := pods[0]
			if term := terminated(p); p.Status.Phase != corev1.PodFailed || term == nil || term.ExitCode != 3 || term.Reason != "Error" {
				t.Errorf("pod phase %s, terminated %+v; want Failed, exit 3, reason Error", p.Status.Phase, term)
			}
		})

		t.Run("OOM kill fails the job", func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, c)
			j := newJob("oom", 1, map[string]string{kubeenv.AnnotationOOMKilled: "true"})
			createJob(t, c, ns, j)
			waitJobCondition(t, c, ns, j.Name, batchv1.JobFailed)
			pods := listPods(t, c, ns, j.Name)
			if len(pods) != 1 {
				t.Fatalf("%d pods, want 1", len(pods))
			}
			if term := terminated(pods[0]); term == nil || term.ExitCode != 137 || term.Reason != "OOMKilled" {
				t.Errorf("terminated %+v, want exit 137, reason OOMKilled", term)
			}
		})

		t.Run("unschedulable pod stays Pending", func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, c)
			j := newJob("nowhere", 1, nil)
			j.Spec.Template.Spec.NodeSelector = map[string]string{kubeenv.LabelGKENodePool: "no-such-pool"}
			createJob(t, c, ns, j)
			var p corev1.Pod
			waitFor(t, "pod marked unschedulable", func() (bool, error) {
				pods := listPods(t, c, ns, j.Name)
				if len(pods) != 1 {
					return false, nil
				}
				p = pods[0]
				cond := podCondition(p, corev1.PodScheduled)
				return cond != nil && cond.Status == corev1.ConditionFalse, nil
			})
			cond := podCondition(p, corev1.PodScheduled)
			if p.Status.Phase != corev1.PodPending || cond.Reason != corev1.PodReasonUnschedulable || p.Spec.NodeName != "" {
				t.Errorf("pod phase %s, node %q, PodScheduled %+v; want Pending, unbound, Unschedulable", p.Status.Phase, p.Spec.NodeName, cond)
			}
		})

		t.Run("deleting a running job removes its pods", func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, c)
			j := newJob("forever", 1, map[string]string{kubeenv.AnnotationRunForever: "true"})
			createJob(t, c, ns, j)
			waitFor(t, "pod Running", func() (bool, error) {
				pods := listPods(t, c, ns, j.Name)
				return len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning, nil
			})
			time.Sleep(1500 * time.Millisecond) // past the default duration: still Running
			if pods := listPods(t, c, ns, j.Name); len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning {
				t.Fatalf("run-forever pod no longer Running: %v", pods)
			}
			bg := metav1.DeletePropagationBackground
			if err := c.Clientset().BatchV1().Jobs(ns).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "pods gone", func() (bool, error) {
				return len(listPods(t, c, ns, j.Name)) == 0, nil
			})
		})
	})

	// kwok now and then loses the Stage that ends a pod; the cluster
	// nudges such a pod. A node kwok does not manage stands for the lost
	// end: its pods are made Running by hand, started long ago, and
	// nothing ends them.
	t.Run("a pod whose end kwok lost is nudged", func(t *testing.T) {
		ns := namespace(t, c)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.Name() + "-unplayed"}}
		if _, err := c.Clientset().CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Clientset().CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
		})
		before := c.Nudged()
		runningSince := func(name string, annotations map[string]string) {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
				Spec: corev1.PodSpec{
					NodeName:      node.Name,
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "falcon.test/trainer:v1"}},
				},
			}
			p, err := c.Clientset().CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Status.Phase = corev1.PodRunning
			p.Status.StartTime = &metav1.Time{Time: time.Now().Add(-kubeenv.StalledAfter - 5*time.Second)}
			if _, err := c.Clientset().CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Created first, so the watch has it whenever it has the other.
		runningSince("forever", map[string]string{kubeenv.AnnotationRunForever: "true"})
		runningSince("long", map[string]string{kubeenv.AnnotationDuration: "1h"})
		runningSince("lost", map[string]string{kubeenv.AnnotationDuration: "1s"})
		waitFor(t, "the lost pod nudged", func() (bool, error) {
			p, err := c.Clientset().CoreV1().Pods(ns).Get(ctx, "lost", metav1.GetOptions{})
			return err == nil && p.Annotations[kubeenv.AnnotationNudged] != "", err
		})
		if got := c.Nudged() - before; got != 1 {
			t.Errorf("%d nudges, want 1", got)
		}
		for _, name := range []string{"forever", "long"} {
			p, err := c.Clientset().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := p.Annotations[kubeenv.AnnotationNudged]; ok {
				t.Errorf("pod %s, which has not outlived its run, was nudged at %s", name, v)
			}
		}
	})

	t.Run("job survives an apiserver restart", func(t *testing.T) {
		ns := namespace(t, c)
		j := newJob("restart", 1, map[string]string{kubeenv.AnnotationDuration: "4s"})
		createJob(t, c, ns, j)
		waitFor(t, "pod Running", func() (bool, error) {
			pods := listPods(t, c, ns, j.Name)
			return len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning, nil
		})
		begin := time.Now()
		c.StopAPIServer()
		stopped := time.Since(begin)
		if _, err := c.Clientset().BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{}); err == nil {
			t.Fatal("apiserver answered while stopped")
		}
		begin = time.Now()
		if err := c.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("apiserver stopped in %s, ready again in %s", stopped.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
		waitJobCondition(t, c, ns, j.Name, batchv1.JobComplete)
	})
}

// TestTwoClusters shows clusters are independent: each sees only its own
// nodes and runs its own Jobs.
func TestTwoClusters(t *testing.T) {
	ctx := testContext(t)
	// StartCluster, not Start: the two start concurrently, off the test's
	// goroutine, where Start's t.Fatal would not be allowed.
	clusters := make([]*kubeenv.Cluster, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	begin := time.Now()
	for i, name := range []string{"edge-a", "edge-b"} {
		dir := t.TempDir()
		wg.Go(func() {
			clusters[i], errs[i] = kubeenv.StartCluster(ctx, dir, kubeenv.WithName(name), kubeenv.WithLogf(t.Logf))
		})
	}
	wg.Wait()
	for i, c := range clusters {
		if errs[i] != nil {
			t.Error(errs[i])
			continue
		}
		t.Cleanup(func() {
			if t.Failed() {
				var b strings.Builder
				c.DumpLogs(&b, 40)
				t.Logf("cluster %s logs:\n%s", c.Name(), b.String())
			}
			c.Stop()
		})
	}
	if t.Failed() {
		t.FailNow()
	}
	a, b := clusters[0], clusters[1]
	t.Logf("two clusters started side by side in %s (%s, %s)", time.Since(begin).Round(time.Millisecond),
		a.StartupTime().Round(time.Millisecond), b.StartupTime().Round(time.Millisecond))
	if a.Host() == b.Host() {
		t.Fatalf("both clusters at %s", a.Host())
	}

	for _, tc := range []struct {
		c     *kubeenv.Cluster
		nodes int
	}{{a, 1}, {b, 2}} {
		if _, err := tc.c.AddNodes(ctx, tc.nodes, map[string]string{kubeenv.LabelGKENodePool: "pool"}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		c    *kubeenv.Cluster
		want int
	}{{a, 1}, {b, 2}} {
		nodes, err := tc.c.Clientset().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != tc.want {
			t.Errorf("cluster %s has %d nodes, want %d", tc.c.Name(), len(nodes.Items), tc.want)
		}
	}
	nss := make([]string, len(clusters))
	for i, c := range clusters {
		nss[i] = namespace(t, c)
		createJob(t, c, nss[i], newJob("hello", 1, nil))
	}
	for i, c := range clusters {
		waitJobCondition(t, c, nss[i], "hello", batchv1.JobComplete)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var nsSeq struct {
	sync.Mutex
	n int
}

func namespace(t *testing.T, c *kubeenv.Cluster) string {
	t.Helper()
	nsSeq.Lock()
	nsSeq.n++
	name := fmt.Sprintf("test-%d", nsSeq.n)
	nsSeq.Unlock()
	if _, err := c.CreateNamespace(testContext(t), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// newJob is a Job of completions pods (all at once) whose pods carry
// annotations and tolerate the TPU taint, with no retries.
func newJob(name string, completions int32, annotations map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Completions:  &completions,
			Parallelism:  &completions,
			BackoffLimit: new(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Tolerations:   []corev1.Toleration{tpuToleration},
					Containers:    []corev1.Container{{Name: "main", Image: "falcon.test/trainer:v1"}},
				},
			},
		},
	}
}

func createJob(t *testing.T, c *kubeenv.Cluster, ns string, j *batchv1.Job) {
	t.Helper()
	if _, err := c.Clientset().BatchV1().Jobs(ns).Create(testContext(t), j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitJobCondition(t *testing.T, c *kubeenv.Cluster, ns, name string, want batchv1.JobConditionType) batchv1.JobCondition {
	t.Helper()
	var got batchv1.JobCondition
	waitFor(t, fmt.Sprintf("job %s/%s %s", ns, name, want), func() (bool, error) {
		j, err := c.Clientset().BatchV1().Jobs(ns).Get(testContext(t), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range j.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				continue
			}
			if cond.Type == want {
				got = cond
				return true, nil
			}
			if cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed {
				return false, fmt.Errorf("job ended %s (%s: %s), want %s", cond.Type, cond.Reason, cond.Message, want)
			}
		}
		return false, nil
	})
	return got
}

func listPods(t *testing.T, c *kubeenv.Cluster, ns, job string) []corev1.Pod {
	t.Helper()
	pods, err := c.Clientset().CoreV1().Pods(ns).List(testContext(t), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// podLog records every state of a Job's pods that a watch delivers.
type podLog struct {
	mu   sync.Mutex
	seen map[string]corev1.Pod // pod name -> last state seen Running
}

func watchPods(t *testing.T, c *kubeenv.Cluster, ns, job string) *podLog {
	t.Helper()
	ctx, cancel := context.WithCancel(testContext(t))
	w, err := c.Clientset().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	l := &podLog{seen: map[string]corev1.Pod{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodRunning {
				l.mu.Lock()
				l.seen[p.Name] = *p
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return l
}

func (l *podLog) running() map[string]corev1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]corev1.Pod, len(l.seen))
	for k, v := range l.seen {
		out[k] = v
	}
	return out
}

func terminated(p corev1.Pod) *corev1.ContainerStateTerminated {
	if len(p.Status.ContainerStatuses) == 0 {
		return nil
	}
	return p.Status.ContainerStatuses[0].State.Terminated
}

func podCondition(p corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// waitFor polls cond every 100ms for up to a minute.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
