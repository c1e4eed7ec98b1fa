package podlogs_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/falconhq/falcon/internal/podlogs"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// One cluster for the package's tests: starting one costs seconds of both
// cores. kubeenv builds missing binaries or fails; it never skips.
var shared struct {
	once sync.Once
	dir  string
	c    *kubeenv.Cluster
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		if code != 0 {
			shared.c.DumpLogs(os.Stderr, 40)
		}
		shared.c.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func cluster(t *testing.T) *kubeenv.Cluster {
	t.Helper()
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "podlogs-kube-"); shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute) // a first build of the binaries is long
		defer cancel()
		shared.c, shared.err = kubeenv.StartCluster(ctx, shared.dir, kubeenv.WithPodLogs(), kubeenv.WithLogf(log.Printf))
		if shared.err == nil {
			_, shared.err = shared.c.AddNodes(ctx, 1, nil, nil, nil)
		}
	})
	if shared.err != nil {
		t.Fatalf("kubeenv: %v", shared.err)
	}
	return shared.c
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
	name := fmt.Sprintf("podlogs-%d", nsSeq.n)
	nsSeq.Unlock()
	if _, err := c.CreateNamespace(testContext(t), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// createJob creates an Indexed Job shaped like Falcon's (role label, task
// container, no retries) of ranks pods, parallel at a time, whose pods kwok
// keeps Running until endPods.
func createJob(t *testing.T, c *kubeenv.Cluster, ns, name string, ranks, parallel int32) {
	t.Helper()
	createSliceJob(t, c, ns, name, name, 0, ranks, parallel)
}

// createSliceJob creates the Job named name of Falcon job jobID whose
// ranks start at firstRank, as Falcon renders each slice of a multi-slice
// job (render.LabelFirstRank).
func createSliceJob(t *testing.T, c *kubeenv.Cluster, ns, jobID, name string, firstRank, ranks, parallel int32) {
	t.Helper()
	labels := map[string]string{render.LabelRole: "worker", render.LabelJobID: jobID}
	if name != jobID {
		labels[render.LabelFirstRank] = fmt.Sprint(firstRank)
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: batchv1.JobSpec{
			Completions:    &ranks,
			Parallelism:    &parallel,
			CompletionMode: new(batchv1.IndexedCompletion),
			BackoffLimit:   new(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels,
					Annotations: map[string]string{kubeenv.AnnotationRunForever: "true"},
				},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: render.ContainerName, Image: "falcon.test/trainer:v1"}},
				},
			},
		},
	}
	if _, err := c.Clientset().BatchV1().Jobs(ns).Create(testContext(t), j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runningPods waits until the Job has n Running pods and returns them by rank.
func runningPods(t *testing.T, c *kubeenv.Cluster, ns, job string, n int) []corev1.Pod {
	t.Helper()
	ctx := testContext(t)
	for {
		list, err := c.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
		if err != nil {
			t.Fatal(err)
		}
		var running []corev1.Pod
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running = append(running, p)
			}
		}
		if len(running) == n {
			slices.SortFunc(running, func(a, b corev1.Pod) int {
				return strings.Compare(a.Annotations[batchv1.JobCompletionIndexAnnotation], b.Annotations[batchv1.JobCompletionIndexAnnotation])
			})
			return running
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s: %d pods Running, want %d", job, len(running), n)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// runningRank waits until the Job's pod of rank is Running and returns it.
func runningRank(t *testing.T, c *kubeenv.Cluster, ns, job string, rank int) corev1.Pod {
	t.Helper()
	ctx := testContext(t)
	for {
		list, err := c.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.Annotations[batchv1.JobCompletionIndexAnnotation] == fmt.Sprint(rank) {
				return p
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s: no Running pod of rank %d", job, rank)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// serve ties each pod's task container to a fresh log file and returns the
// files by rank.
func serve(t *testing.T, c *kubeenv.Cluster, ns string, pods []corev1.Pod) []string {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for _, p := range pods {
		f := filepath.Join(dir, p.Name+".log")
		if err := c.ServePodLogs(testContext(t), ns, p.Name, render.ContainerName, f); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// endPods lets kwok end the pods (Succeeded, about a second later).
func endPods(t *testing.T, c *kubeenv.Cluster, ns string, pods []corev1.Pod) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, kubeenv.AnnotationRunForever)
	for _, p := range pods {
		if _, err := c.Clientset().CoreV1().Pods(ns).Patch(testContext(t), p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func appendLog(t *testing.T, file string, ts time.Time, lines ...string) {
	t.Helper()
	if err := kubeenv.AppendPodLog(file, ts, lines...); err != nil {
		t.Fatal(err)
	}
}

// entry is what the tests compare of a Line.
type entry struct {
	Pod  string
	Role string
	Rank int
	Time time.Time
	Seq  int
	Text string
}

func entryOf(l podlogs.Line) entry { return entry{l.Pod, l.Role, l.Rank, l.Time, l.Seq, l.Text} }

func read(t *testing.T, c *kubeenv.Cluster, ns, job string, opts podlogs.Options) []entry {
	t.Helper()
	var out []entry
	if err := podlogs.Stream(testContext(t), c.Clientset(), ns, job, opts, func(l podlogs.Line) error {
		out = append(out, entryOf(l))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// base is a whole second, so that tests can place lines inside and across
// the kubelet's one-second sinceTime.
var base = time.Now().UTC().Add(-time.Hour).Truncate(time.Second)

// TestStream reads a running Job's pods once, through the apiserver's
// pods/log and kwok: every line with its rank, role, time and place; ranks;
// tail, also cutting through lines that share a timestamp; since, inside a
// second; grep with and without tail; a 1 MiB line whole.
func TestStream(t *testing.T) {
	c := cluster(t)
	ns := namespace(t, c)
	createJob(t, c, ns, "train", 2, 2)
	pods := runningPods(t, c, ns, "train", 2)
	files := serve(t, c, ns, pods)

	t1, t2, t3 := base.Add(100*time.Millisecond), base.Add(time.Second+200*time.Millisecond), base.Add(time.Second+700*time.Millisecond)
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB, written as 64 partial records
	appendLog(t, files[0], t1, "rank 0 starts")
	appendLog(t, files[0], t2, "step_time: 0.41", "step", "step") // three lines, one timestamp, two alike
	appendLog(t, files[0], t3, "rank 0 done")
	appendLog(t, files[1], t1, "rank 1 starts")
	appendLog(t, files[1], t2, big)
	appendLog(t, files[1], t3, "step_time: 0.52")

	p0, p1 := pods[0].Name, pods[1].Name
	r0 := []entry{
		{p0, "worker", 0, t1, 1, "rank 0 starts"},
		{p0, "worker", 0, t2, 1, "step_time: 0.41"},
		{p0, "worker", 0, t2, 2, "step"},
		{p0, "worker", 0, t2, 3, "step"},
		{p0, "worker", 0, t3, 1, "rank 0 done"},
	}
	r1 := []entry{
		{p1, "worker", 1, t1, 1, "rank 1 starts"},
		{p1, "worker", 1, t2, 1, big},
		{p1, "worker", 1, t3, 1, "step_time: 0.52"},
	}
	for _, tc := range []struct {
		name string
		opts podlogs.Options
		want []entry
	}{
		{"everything in rank order", podlogs.Options{}, append(slices.Clone(r0), r1...)},
		{"ranks", podlogs.Options{Ranks: []int{1}}, r1},
		{"tail cutting a timestamp's lines keeps their places", podlogs.Options{Tail: 3, Ranks: []int{0}}, r0[2:]},
		{"since inside a second", podlogs.Options{Since: t2.Add(time.Millisecond)}, []entry{r0[4], r1[2]}},
		{"since at a line", podlogs.Options{Since: t2, Ranks: []int{0}}, r0[1:]},
		{"grep", podlogs.Options{Grep: `^step_time: `}, []entry{r0[1], r1[2]}},
		{"tail counts matching lines", podlogs.Options{Grep: `step`, Tail: 2, Ranks: []int{0}}, r0[2:4]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := read(t, c, ns, "train", tc.opts)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lines (-want +got):\n%.3000s", diff)
			}
		})
	}

	// Last: it appends to rank 0's log.
	t.Run("follow from a tail", func(t *testing.T) {
		ctx, cancel := context.WithCancel(testContext(t))
		defer cancel()
		f := follow(ctx, c, ns, "train", podlogs.Options{Tail: 2, Ranks: []int{0}})
		var got []entry
		for _, l := range f.next(t, 2) {
			got = append(got, entryOf(l))
		}
		t4 := base.Add(3 * time.Second)
		appendLog(t, files[0], t4, "step")
		got = append(got, entryOf(f.next(t, 1)[0]))
		want := append(slices.Clone(r0[3:]), entry{p0, "worker", 0, t4, 1, "step"})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
	})
}

// follower runs a followed Stream and hands its lines over a channel.
type follower struct {
	lines chan podlogs.Line
	done  chan error
}

func follow(ctx context.Context, c *kubeenv.Cluster, ns, job string, opts podlogs.Options) *follower {
	f := &follower{lines: make(chan podlogs.Line, 1024), done: make(chan error, 1)}
	opts.Follow = true
	go func() {
		f.done <- podlogs.Stream(ctx, c.Clientset(), ns, job, opts, func(l podlogs.Line) error {
			f.lines <- l
			return nil
		})
	}()
	return f
}

// next waits for n lines and returns them.
func (f *follower) next(t *testing.T, n int) []podlogs.Line {
	t.Helper()
	var out []podlogs.Line
	timeout := time.After(time.Minute)
	for len(out) < n {
		select {
		case l := <-f.lines:
			out = append(out, l)
		case err := <-f.done:
			t.Fatalf("follow ended (%v) after %d of %d lines: %v", err, len(out), n, texts(out))
		case <-timeout:
			t.Fatalf("%d of %d lines after a minute: %v", len(out), n, texts(out))
		}
	}
	return out
}

// end waits for the followed read to return and for no more lines.
func (f *follower) end(t *testing.T) error {
	t.Helper()
	select {
	case err := <-f.done:
		select {
		case l := <-f.lines:
			t.Errorf("extra line after the end: %+v", l)
		default:
		}
		return err
	case l := <-f.lines:
		t.Fatalf("extra line %q", l.Text)
	case <-time.After(time.Minute):
		t.Fatal("follow did not end within a minute of the pods ending")
	}
	return nil
}

func texts(lines []podlogs.Line) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l.Pod+": "+l.Text)
	}
	return out
}

// byPod groups lines by pod, keeping their order.
func byPod(lines []podlogs.Line) map[string][]string {
	out := map[string][]string{}
	for _, l := range lines {
		out[l.Pod] = append(out[l.Pod], l.Text)
	}
	return out
}

// TestFollow follows a Job of three ranks, two at a time: the lines of ranks
// 0 and 1 arrive as they are written (appended after the stream opened), each
// pod in order; rank 2, whose pod the Job controller creates only once a
// rank has ended, is picked up; and the read ends by itself once the pods
// have ended and the Job is Complete.
func TestFollow(t *testing.T) {
	c := cluster(t)
	ns := namespace(t, c)
	ctx := testContext(t)
	createJob(t, c, ns, "train", 3, 2)
	f := follow(ctx, c, ns, "train", podlogs.Options{})
	pods := runningPods(t, c, ns, "train", 2)
	files := serve(t, c, ns, pods)

	appendLog(t, files[0], base, "0: one")
	appendLog(t, files[1], base, "1: one")
	got := f.next(t, 2)
	for i := range 5 {
		ts := base.Add(time.Duration(i+1) * 300 * time.Millisecond)
		appendLog(t, files[0], ts, fmt.Sprintf("0: line %d", i))
		appendLog(t, files[1], ts, fmt.Sprintf("1: line %d", i), fmt.Sprintf("1: line %d again", i))
		got = append(got, f.next(t, 3)...)
	}
	appendLog(t, files[0], base.Add(5*time.Second), "0: done") // read after the pod has ended
	endPods(t, c, ns, pods[:1])
	pods = append(pods, runningRank(t, c, ns, "train", 2))
	files = append(files, serve(t, c, ns, pods[2:])...)
	appendLog(t, files[2], base.Add(6*time.Second), "2: one")
	appendLog(t, files[1], base.Add(6*time.Second), "1: done")
	got = append(got, f.next(t, 3)...)
	appendLog(t, files[2], base.Add(7*time.Second), "2: done")
	endPods(t, c, ns, pods[1:])
	got = append(got, f.next(t, 1)...)
	if err := f.end(t); err != nil {
		t.Fatalf("follow ended with %v, want nil once the Job is Complete", err)
	}

	want := map[string][]string{pods[0].Name: {"0: one"}, pods[1].Name: {"1: one"}}
	for i := range 5 {
		want[pods[0].Name] = append(want[pods[0].Name], fmt.Sprintf("0: line %d", i))
		want[pods[1].Name] = append(want[pods[1].Name], fmt.Sprintf("1: line %d", i), fmt.Sprintf("1: line %d again", i))
	}
	want[pods[0].Name] = append(want[pods[0].Name], "0: done")
	want[pods[1].Name] = append(want[pods[1].Name], "1: done")
	want[pods[2].Name] = []string{"2: one", "2: done"}
	if diff := cmp.Diff(want, byPod(got)); diff != "" {
		t.Errorf("lines by pod (-want +got):\n%s", diff)
	}
	for _, l := range got {
		if l.Role != "worker" || l.Rank != slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == l.Pod }) {
			t.Errorf("line %q of %s: role %q rank %d", l.Text, l.Pod, l.Role, l.Rank)
		}
	}
}

// TestResume breaks a followed read inside a run of identical lines that
// share one timestamp, writes more (of that timestamp and later), and
// follows again from the cursor: every line exactly once. Then the
// apiserver restarts under a followed read: the reader reconnects by itself,
// without losing or repeating a line written while it was down.
func TestResume(t *testing.T) {
	c := cluster(t)
	ns := namespace(t, c)
	createJob(t, c, ns, "train", 1, 1)
	pods := runningPods(t, c, ns, "train", 1)
	files := serve(t, c, ns, pods)
	ts := base.Add(400 * time.Millisecond)
	appendLog(t, files[0], base, "first")
	appendLog(t, files[0], ts, "tick", "tick", "tick")

	ctx1, cancel1 := context.WithCancel(testContext(t))
	f1 := follow(ctx1, c, ns, "train", podlogs.Options{})
	cur := podlogs.Cursor{}
	seen := f1.next(t, 3) // first, tick, tick: the client goes away here
	for _, l := range seen {
		cur.Advance(l)
	}
	cancel1()
	<-f1.done

	appendLog(t, files[0], ts, "tick")                                                  // the fourth of that timestamp
	appendLog(t, files[0], base.Add(2*time.Second), "after")                            // a later second
	f2 := follow(testContext(t), c, ns, "train", podlogs.Options{Resume: cur, Tail: 1}) // Resume wins over Tail
	seen = append(seen, f2.next(t, 3)...)
	if diff := cmp.Diff([]string{"first", "tick", "tick", "tick", "tick", "after"}, byPod(seen)[pods[0].Name]); diff != "" {
		t.Fatalf("lines across the reconnect (-want +got):\n%s", diff)
	}
	if l := seen[4]; !l.Time.Equal(ts) || l.Seq != 4 {
		t.Errorf("fourth tick at %v seq %d, want %v seq 4", l.Time, l.Seq, ts)
	}

	c.StopAPIServer()
	appendLog(t, files[0], base.Add(3*time.Second), "while the apiserver was down", "while the apiserver was down")
	if err := c.StartAPIServer(testContext(t)); err != nil {
		t.Fatal(err)
	}
	appendLog(t, files[0], base.Add(4*time.Second), "back")
	seen = append(seen, f2.next(t, 3)...)
	endPods(t, c, ns, pods)
	if err := f2.end(t); err != nil {
		t.Fatalf("follow ended with %v", err)
	}
	want := []string{"first", "tick", "tick", "tick", "tick", "after", "while the apiserver was down", "while the apiserver was down", "back"}
	if diff := cmp.Diff(want, byPod(seen)[pods[0].Name]); diff != "" {
		t.Errorf("lines across the apiserver restart (-want +got):\n%s", diff)
	}
	for i, l := range seen {
		if l.Rank != 0 || l.Pod != pods[0].Name {
			t.Errorf("line %d %q: pod %s rank %d", i, l.Text, l.Pod, l.Rank)
		}
	}
}

// TestFollowMultislice follows a job of two slices, a Job each: every
// line comes with its rank across slices, and the read ends only once both
// slices' Jobs have ended.
func TestFollowMultislice(t *testing.T) {
	c := cluster(t)
	ns := namespace(t, c)
	ctx := testContext(t)
	createSliceJob(t, c, ns, "ms", "ms-s0", 0, 2, 2)
	createSliceJob(t, c, ns, "ms", "ms-s1", 2, 2, 2)
	f := follow(ctx, c, ns, "ms", podlogs.Options{})
	pods := append(runningPods(t, c, ns, "ms-s0", 2), runningPods(t, c, ns, "ms-s1", 2)...)
	files := serve(t, c, ns, pods)
	for r, file := range files {
		appendLog(t, file, base, fmt.Sprintf("rank %d", r))
	}
	got := f.next(t, 4)
	endPods(t, c, ns, pods[:2]) // slice 0 ends; slice 1 still runs
	appendLog(t, files[3], base.Add(time.Second), "rank 3 still here")
	got = append(got, f.next(t, 1)...)
	endPods(t, c, ns, pods[2:])
	if err := f.end(t); err != nil {
		t.Fatalf("follow ended with %v, want nil once both slices' Jobs are Complete", err)
	}
	ranks := map[string]int{}
	for _, l := range got {
		ranks[l.Text] = l.Rank
	}
	want := map[string]int{"rank 0": 0, "rank 1": 1, "rank 2": 2, "rank 3": 3, "rank 3 still here": 3}
	if diff := cmp.Diff(want, ranks); diff != "" {
		t.Errorf("rank of each line (-want +got):\n%s", diff)
	}
}
