package podlogs

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/falconhq/falcon/internal/provider/kube/render"
)

// drainAttempts is how often the last read of an ended pod is tried before
// the pod's log is given up as incomplete (its node may be gone for good).
const drainAttempts = 5

// Retry pacing of a broken or not yet available pod log stream.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// Stream reads the task container logs of the pods of the Falcon job job in
// namespace (pods labelled falcon.dev/job-id=job: its one Kubernetes Job's,
// or every slice's of a multi-slice job), and hands each line to emit,
// never concurrently; an error from emit stops the read and is returned.
// Without opts.Follow it reads each pod that has started, in rank order, and
// returns; with it, it reads until the pods and every Job of the job have
// ended or ctx ends (then it returns ctx's error). Bad options are an
// errdefs.FieldError naming the option ("grep", "tail", "ranks").
//
// A pod whose log cannot be read fails a one-off read with an error naming
// it. A followed read retries; a pod whose log could still not be read to
// the end after it ended makes Stream return, once the others are done, an
// error naming it (the bucket copy then has the rest).
func Stream(ctx context.Context, client kubernetes.Interface, namespace, job string, opts Options, emit func(Line) error) error {
	o, err := opts.compile()
	if err != nil {
		return err
	}
	r := &reader{client: client, namespace: namespace, job: job, o: o}
	if !o.Follow {
		return r.once(ctx, emit)
	}
	return r.follow(ctx, emit)
}

type reader struct {
	client    kubernetes.Interface
	namespace string
	job       string
	o         *compiled
}

// selector finds the job's pods and Jobs by Falcon's job label: a
// multi-slice job has a Job per slice, each with its own job-name.
func (r *reader) selector() string { return render.LabelJobID + "=" + r.job }

// once reads every started pod's log in rank order.
func (r *reader) once(ctx context.Context, emit func(Line) error) error {
	list, err := r.client.CoreV1().Pods(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: r.selector()})
	if err != nil {
		return fmt.Errorf("list pods of job %s: %w", r.job, err)
	}
	var pods []*podReader
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.Phase == corev1.PodPending {
			continue // nothing written yet; the kubelet would refuse
		}
		if pr := r.newPod(p); r.o.wantRank(pr.rank) {
			pods = append(pods, pr)
		}
	}
	slices.SortFunc(pods, func(a, b *podReader) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.name, b.name))
	})
	for _, p := range pods {
		if err := p.readOnce(ctx, emit); err != nil {
			if apierrors.IsNotFound(err) && ctx.Err() == nil {
				continue // deleted since the list
			}
			return fmt.Errorf("log of pod %s: %w", p.name, err)
		}
	}
	return nil
}

// podReader reads one pod's log and remembers how far.
type podReader struct {
	r    *reader
	name string
	role string
	rank int

	pos    Position // the last line read, delivered or not
	hasPos bool
}

func (r *reader) newPod(p *corev1.Pod) *podReader {
	pr := &podReader{r: r, name: p.Name, role: p.Labels[render.LabelRole], rank: podRank(p, r.job)}
	if pos, ok := r.o.Resume[p.Name]; ok {
		pr.pos, pr.hasPos = pos, true
	}
	return pr
}

// keep says whether a line read is delivered: Since and Grep.
func (p *podReader) keep(l Line) bool {
	return !l.Time.Before(p.r.o.Since) && p.r.o.match(l.Text)
}

func (p *podReader) readOnce(ctx context.Context, emit func(Line) error) error {
	if !p.hasPos && p.r.o.Tail > 0 {
		lines, err := p.tail(ctx)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if err := emit(l); err != nil {
				return err
			}
		}
		return nil
	}
	_, err := p.pass(ctx, false, nil, p.deliverTo(emit))
	return err
}

func (p *podReader) deliverTo(emit func(Line) error) func(Line) error {
	return func(l Line) error {
		if !p.keep(l) {
			return nil
		}
		return emit(l)
	}
}

// pass opens the pod's log once, from the last position read (or Since),
// following or not, and calls fn with each line after that position; it
// returns how many lines it read (skipped ones included) when the stream
// ends or fails. tail asks the kubelet for the last lines only.
//
// Positions count lines with the same timestamp from the first line of the
// pass. The kubelet's sinceTime has a resolution of one second, so a pass
// from a position starts at or before the first line with its timestamp and
// the count is exact; a pass with tail may start inside a group of lines with
// one timestamp, which tail corrects.
func (p *podReader) pass(ctx context.Context, follow bool, tail *int64, fn func(Line) error) (int, error) {
	opts := &corev1.PodLogOptions{Container: p.r.o.Container, Follow: follow, Timestamps: true, TailLines: tail}
	from := p.r.o.Since
	if p.hasPos && p.pos.Time.After(from) {
		from = p.pos.Time
	}
	if !from.IsZero() {
		t := metav1.NewTime(from.Truncate(time.Second))
		opts.SinceTime = &t
	}
	rc, err := p.r.client.CoreV1().Pods(p.r.namespace).GetLogs(p.name, opts).Stream(ctx)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	var cur Position
	n := 0
	for {
		raw, err := br.ReadBytes('\n')
		// A piece without its newline is kept only at the real end of a
		// finished log; a followed stream cut mid-line is read again next
		// pass.
		if len(raw) > 0 && (err == nil || (err == io.EOF && !follow)) {
			n++
			ts, text := splitStamp(trimEOL(raw))
			if ts.Equal(cur.Time) {
				cur.Seq++
			} else {
				cur = Position{Time: ts, Seq: 1}
			}
			if !p.hasPos || after(cur, p.pos) {
				p.pos, p.hasPos = cur, true
				if ferr := fn(Line{Pod: p.name, Role: p.role, Rank: p.rank, Time: ts, Seq: cur.Seq, Text: string(text)}); ferr != nil {
					return n, ferr
				}
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func after(a, b Position) bool {
	return a.Time.After(b.Time) || (a.Time.Equal(b.Time) && a.Seq > b.Seq)
}

// tail reads the last Tail lines that pass Since and Grep, without following,
// and leaves the position at the last line of the log read. With Grep the
// whole log is read through a ring of Tail lines; without, the kubelet tails.
func (p *podReader) tail(ctx context.Context) ([]Line, error) {
	n := p.r.o.Tail
	if p.r.o.grep != nil {
		ring := newRing(n)
		_, err := p.pass(ctx, false, nil, func(l Line) error {
			if p.keep(l) {
				ring.add(l)
			}
			return nil
		})
		return ring.lines(), err
	}
	t := int64(n)
	var kept []Line
	var first time.Time
	inFirst := 0 // lines read stamped like the first one
	read, err := p.pass(ctx, false, &t, func(l Line) error {
		if inFirst == 0 {
			first = l.Time
		}
		if l.Time.Equal(first) {
			inFirst++
		}
		if p.keep(l) {
			kept = append(kept, l)
		}
		return nil
	})
	if err != nil || read < n {
		return kept, err // the whole log (since Since) was read: Seq is exact
	}
	// The tail may have begun inside a group of lines sharing the first
	// line's timestamp: count the group in full so that Seq, and a resume
	// from it, are exact.
	total, err := p.countStamped(ctx, first)
	if err != nil {
		return nil, err
	}
	if shift := total - inFirst; shift > 0 {
		for i := range kept {
			if kept[i].Time.Equal(first) {
				kept[i].Seq += shift
			}
		}
		if p.pos.Time.Equal(first) {
			p.pos.Seq += shift
		}
	}
	return kept, nil
}

// countStamped counts the lines of the log stamped exactly ts, reading from
// ts's second up to the first line after ts.
func (p *podReader) countStamped(ctx context.Context, ts time.Time) (int, error) {
	since := metav1.NewTime(ts.Truncate(time.Second))
	rc, err := p.r.client.CoreV1().Pods(p.r.namespace).GetLogs(p.name, &corev1.PodLogOptions{
		Container: p.r.o.Container, Timestamps: true, SinceTime: &since,
	}).Stream(ctx)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	n := 0
	for {
		// ReadSlice gives a long line in pieces; the first piece carries
		// the timestamp and the rest is skipped.
		raw, err := br.ReadSlice('\n')
		if len(raw) > 0 {
			t, _ := splitStamp(raw)
			switch {
			case t.After(ts):
				return n, nil
			case t.Equal(ts):
				n++
			}
		}
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = br.ReadSlice('\n')
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// follow reads every selected pod at once, as they appear, until they and
// the Job have ended.
//
// One cycle of the loop: take a line from a pod's reader and emit it; or, on
// a change (a pod appeared, started, ended or was deleted, the Job changed,
// a reader finished), start readers for pods that have started and check
// whether everything has ended.
func (r *reader) follow(ctx context.Context, emit func(Line) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &watcher{r: r, ctx: ctx, lines: make(chan Line), changed: make(chan struct{}, 1), pods: map[string]*followed{}}

	pods := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = r.selector()
			return r.client.CoreV1().Pods(r.namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = r.selector()
			return r.client.CoreV1().Pods(r.namespace).Watch(ctx, o)
		},
	}, &corev1.Pod{}, 0, cache.Indexers{})
	jobs := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = r.selector()
			return r.client.BatchV1().Jobs(r.namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = r.selector()
			return r.client.BatchV1().Jobs(r.namespace).Watch(ctx, o)
		},
	}, &batchv1.Job{}, 0, cache.Indexers{})
	poke := func(any) { w.poke() }
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, obj any) { w.poke() },
		DeleteFunc: poke,
	}); err != nil {
		return err
	}
	if _, err := jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, obj any) { w.poke() },
		DeleteFunc: poke,
	}); err != nil {
		return err
	}
	go pods.RunWithContext(ctx)
	go jobs.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, jobs.HasSynced) {
		return ctx.Err()
	}
	w.podStore, w.jobStore = pods.GetStore(), jobs.GetStore()
	w.poke()

	for {
		select {
		case l := <-w.lines:
			if err := emit(l); err != nil {
				cancel()
				w.wg.Wait()
				return err
			}
		case <-w.changed:
			if done, err := w.sync(); done {
				cancel()
				w.wg.Wait()
				return err
			}
		case <-ctx.Done():
			w.wg.Wait()
			return ctx.Err()
		}
	}
}

// watcher is the state of one followed read: the pods it reads and their
// readers. Only the follow loop calls sync; readers report through lines and
// changed.
type watcher struct {
	r       *reader
	ctx     context.Context
	lines   chan Line
	changed chan struct{}
	wg      sync.WaitGroup

	podStore, jobStore cache.Store

	mu   sync.Mutex
	pods map[string]*followed // by pod name
}

// followed is one pod of a followed read.
type followed struct {
	uid     string
	ended   chan struct{} // closed once the pod is seen Succeeded, Failed or deleted
	started bool          // its reader runs
	done    bool          // its reader has returned
	err     error         // why its log is incomplete, if it is
}

func (w *watcher) poke() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// sync brings the readers in line with the pods seen and says whether the
// read is over, and with which error.
func (w *watcher) sync() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for _, obj := range w.podStore.List() {
		pod := obj.(*corev1.Pod)
		if rank := podRank(pod, w.r.job); !w.r.o.wantRank(rank) {
			continue
		}
		seen[pod.Name] = true
		f := w.pods[pod.Name]
		if f == nil || f.uid != string(pod.UID) {
			if f != nil && !f.done {
				continue // a pod of the same name is still being read
			}
			f = &followed{uid: string(pod.UID), ended: make(chan struct{})}
			w.pods[pod.Name] = f
		}
		terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
		if terminal || (pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodRunning) {
			closeOnce(f.ended)
		}
		if !f.started && pod.Status.Phase != corev1.PodPending {
			f.started = true
			pr := w.r.newPod(pod)
			w.wg.Go(func() {
				err := pr.follow(w.ctx, f.ended, w.send)
				w.mu.Lock()
				f.done, f.err = true, err
				w.mu.Unlock()
				w.poke()
			})
		}
	}
	for name, f := range w.pods {
		if !seen[name] {
			closeOnce(f.ended) // deleted: its reader drains what is left, if it can
		}
	}

	jobEnded := true // no Job (any more): only its pods are left
	for _, obj := range w.jobStore.List() {
		jobEnded = jobEnded && jobFinished(obj.(*batchv1.Job)) // every slice's
	}
	if !jobEnded {
		return false, nil
	}
	var errs []error
	for name, f := range w.pods {
		switch {
		case f.started && !f.done:
			return false, nil
		case !f.started && seen[name] && !isClosed(f.ended):
			// Not started yet, of a Job that has ended (it will be
			// deleted) or of no Job: a bare pod may still start.
			if len(w.jobStore.List()) == 0 {
				return false, nil
			}
		case f.err != nil && !errors.Is(f.err, context.Canceled):
			errs = append(errs, fmt.Errorf("log of pod %s is incomplete: %w", name, f.err))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return cmp.Compare(a.Error(), b.Error()) })
	return true, errors.Join(errs...)
}

func (w *watcher) send(l Line) error {
	select {
	case w.lines <- l:
		return nil
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func closeOnce(c chan struct{}) {
	if !isClosed(c) {
		close(c)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// follow reads one pod until it has ended and been read to the end, or ctx
// ends. Each round: the tail first if asked for; then a followed pass from
// the position, cut short when the pod ends; once it has ended, one last pass
// without following. A pass that fails is retried after a backoff; a pod
// that is gone ends the read quietly.
func (p *podReader) follow(ctx context.Context, ended <-chan struct{}, emit func(Line) error) error {
	deliver := p.deliverTo(emit)
	tailDone := p.hasPos || p.r.o.Tail == 0
	wait := backoffMin
	drains := 0
	for {
		var err error
		switch {
		case !tailDone:
			var lines []Line
			if lines, err = p.tail(ctx); err == nil {
				for _, l := range lines {
					if err := emit(l); err != nil {
						return err
					}
				}
				tailDone = true
				continue
			}
		case isClosed(ended):
			if _, err = p.pass(ctx, false, nil, deliver); err == nil {
				return nil
			}
			if drains++; drains >= drainAttempts && !apierrors.IsNotFound(err) {
				return err
			}
		default:
			passCtx, stop := context.WithCancel(ctx)
			go func() {
				select {
				case <-ended:
				case <-passCtx.Done():
				}
				stop()
			}()
			before := p.pos
			_, err = p.pass(passCtx, true, nil, deliver)
			stop()
			if p.pos != before {
				wait = backoffMin // it made progress: a new break starts afresh
			}
			if isClosed(ended) && ctx.Err() == nil {
				continue // drain next
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if apierrors.IsNotFound(err) {
			return nil // the pod is gone, and with it its log on the node
		}
		// A stream the server ended (a kubelet does when the container
		// exits), or a failure: wait for the pod to end or for the backoff.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ended:
		case <-time.After(wait):
		}
		wait = min(wait*2, backoffMax)
	}
}
