package kubeenv

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// AnnotationNudged is set on a pod that kwok left Running past its end (see
// stallWatch); its value is the time of the nudge.
const AnnotationNudged = "falcon.test/nudged"

// StalledAfter is how long past the end its Stages give it a pod may stay
// Running before the cluster takes kwok to have lost that end.
const StalledAfter = 15 * time.Second

// stallWatch repairs the fake kubelet. kwok now and then loses the delayed
// Stage that ends a pod: seen on loaded machines for pods bound to a node
// created the same instant, their resourceVersion never moving again after
// Running, so the pod runs for good while its test meant it to end a second
// later (a multi-slice job then waits forever on one pod of four). kwok
// plays Stages on events; an annotation is a new event, and kwok then plays
// the Stage it lost (the pod ends one test duration later). Falcon only ever
// sees the pod end, as a kubelet would have ended it, and every nudge is
// logged and counted (Cluster.Nudged), so a test can tell a repaired kubelet
// from its own doing.
type stallWatch struct {
	client kubernetes.Interface
	logf   func(format string, args ...any)
	now    func() time.Time

	// nudged is the last nudge of each pod; only the watch's goroutine
	// uses it.
	nudged map[types.UID]time.Time
	count  atomic.Int64

	cancel context.CancelFunc
	done   chan struct{}
}

// startStallWatch watches every pod of the cluster and, each second, nudges
// those Running longer than StalledAfter past their end.
func startStallWatch(client kubernetes.Interface, logf func(string, ...any)) *stallWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &stallWatch{client: client, logf: logf, now: time.Now, nudged: map[types.UID]time.Time{}, cancel: cancel, done: make(chan struct{})}
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods().Informer()
	factory.Start(ctx.Done())
	go func() {
		defer close(w.done)
		defer factory.Shutdown()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if !pods.HasSynced() {
				continue
			}
			for _, obj := range pods.GetStore().List() {
				if p, ok := obj.(*corev1.Pod); ok {
					if d, stalled := w.stalled(p); stalled {
						w.nudge(ctx, p, d)
					}
				}
			}
		}
	}()
	return w
}

// stop ends the watch and waits for it.
func (w *stallWatch) stop() {
	w.cancel()
	<-w.done
}

// stalled reports whether p has been Running longer than StalledAfter past
// its end, and was not nudged within the last StalledAfter; d is how long
// its Stages run it.
func (w *stallWatch) stalled(p *corev1.Pod) (d time.Duration, stalled bool) {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || p.Status.StartTime == nil {
		return 0, false
	}
	d, ends := PodRunTime(p)
	now := w.now()
	if !ends || now.Sub(p.Status.StartTime.Time) < d+StalledAfter {
		return d, false
	}
	last, ok := w.nudged[p.UID]
	return d, !ok || now.Sub(last) >= d+StalledAfter
}

func (w *stallWatch) nudge(ctx context.Context, p *corev1.Pod, d time.Duration) {
	now := w.now()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, AnnotationNudged, now.UTC().Format(time.RFC3339Nano))
	if _, err := w.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		if ctx.Err() == nil {
			w.logf("kubeenv: nudge stalled pod %s/%s: %v", p.Namespace, p.Name, err)
		}
		return
	}
	w.nudged[p.UID] = now
	w.count.Add(1)
	w.logf("kubeenv: kwok lost the end of pod %s/%s (Running %s since its start, which it should have ended after %s): nudged",
		p.Namespace, p.Name, now.Sub(p.Status.StartTime.Time).Round(time.Second), d)
}

// PodRunTime is how long kwok.yaml's Stages keep p Running once it runs,
// read as they read it: from the pod's annotations, else from the env of
// its first container; 1s when no duration is given. ends is false for a
// pod that runs until deleted (run-forever, or restartPolicy Always with
// neither an exit code nor OOMKilled).
func PodRunTime(p *corev1.Pod) (d time.Duration, ends bool) {
	get := func(annotation string) (string, bool) {
		if v, ok := p.Annotations[annotation]; ok {
			return v, true
		}
		if len(p.Spec.Containers) == 0 {
			return "", false
		}
		env := "FALCON_TEST_" + strings.ToUpper(strings.NewReplacer("-", "_").Replace(strings.TrimPrefix(annotation, "falcon.test/")))
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == env {
				return e.Value, true
			}
		}
		return "", false
	}
	if _, ok := get(AnnotationRunForever); ok {
		return 0, false
	}
	_, exits := get(AnnotationExitCode)
	_, oom := get(AnnotationOOMKilled)
	if p.Spec.RestartPolicy == corev1.RestartPolicyAlways && !exits && !oom {
		return 0, false
	}
	d = time.Second
	if v, ok := get(AnnotationDuration); ok {
		parsed, err := time.ParseDuration(v)
		if err != nil {
			// kwok cannot read it either: the Stage never plays.
			return 0, false
		}
		d = parsed
	}
	return d, true
}

// Nudged is how many times the cluster repaired a pod whose end kwok lost
// (see AnnotationNudged).
func (c *Cluster) Nudged() int64 {
	if c.stalls == nil {
		return 0
	}
	return c.stalls.count.Load()
}
