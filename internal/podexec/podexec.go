package podexec

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/rankexec"
)

// RankPod returns the pod of rank of the Kubernetes Job job: the running one
// if there is one (a retried index may have several), else the newest.
// Found is false when the rank has no pod yet.
func RankPod(ctx context.Context, client kubernetes.Interface, namespace, job string, rank int) (pod *corev1.Pod, found bool, err error) {
	// By Falcon's job label, not the Job's name: a multi-slice job has a
	// Job per slice, and rank is counted across them (render.PodRank).
	list, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: render.LabelJobID + "=" + job})
	if err != nil {
		return nil, false, errdefs.Unavailable("list the pods of job %s: %v", job, err)
	}
	var mine []*corev1.Pod
	for i := range list.Items {
		if p := &list.Items[i]; podRank(p, job) == rank {
			mine = append(mine, p)
		}
	}
	if len(mine) == 0 {
		return nil, false, nil
	}
	slices.SortFunc(mine, func(a, b *corev1.Pod) int {
		ra, rb := a.Status.Phase == corev1.PodRunning, b.Status.Phase == corev1.PodRunning
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	return mine[0], true, nil
}

// podRank is the Falcon rank of a pod of one of the job's Indexed Jobs,
// or -1.
func podRank(p *corev1.Pod, job string) int {
	if n := render.PodRank(p); n >= 0 {
		return n
	}
	// <job>-<index>-<suffix>
	rest, ok := strings.CutPrefix(p.Name, job+"-")
	if !ok {
		return -1
	}
	idx, _, _ := strings.Cut(rest, "-")
	if n, err := strconv.Atoi(idx); err == nil && n >= 0 && strconv.Itoa(n) == idx {
		return n
	}
	return -1
}

// InRank is cmd as it must be exec'd in pod p for it to see its rank's
// environment. On every slice but the first of a multi-slice job the
// container's FALCON_RANK and JAX_PROCESS_ID hold the pod's index within
// its slice: the downward API cannot add the slice's first rank, so the
// task's own shell adds it before the command starts (render's prelude),
// and a shell opened later would see the container's values. Such a
// command runs under /bin/sh (which the prelude needs already) with both
// set to the rank; any other pod's command is run as it is.
func InRank(p *corev1.Pod, cmd []string) []string {
	first, err := strconv.Atoi(p.Labels[render.LabelFirstRank])
	rank := render.PodRank(p)
	if err != nil || first <= 0 || rank < 0 || len(cmd) == 0 {
		return cmd
	}
	n := strconv.Itoa(rank)
	script := "export " + render.EnvRank + "=" + n + " " + render.EnvJAXProcessID + "=" + n + `; exec "$0" "$@"`
	return append([]string{"/bin/sh", "-c", script}, cmd...)
}

// Exec runs s in the task container of namespace/pod through cfg's
// apiserver and returns nil when the command exits 0, a
// *rankexec.ExitError when it exits otherwise, and an errdefs error when it
// could not be run.
func Exec(ctx context.Context, cfg *rest.Config, client kubernetes.Interface, namespace, pod string, s rankexec.Session) error {
	if err := s.Validate(); err != nil {
		return err
	}
	req := client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: rankexec.Container,
			Command:   s.Command,
			Stdin:     s.Stdin != nil,
			Stdout:    true,
			Stderr:    !s.TTY,
			TTY:       s.TTY,
		}, scheme.ParameterCodec)
	ex, err := newExecutor(cfg, req.URL().String())
	if err != nil {
		return fmt.Errorf("exec in pod %s: %w", pod, err)
	}
	opts := remotecommand.StreamOptions{Stdin: s.Stdin, Stdout: s.Stdout, Tty: s.TTY}
	if !s.TTY {
		opts.Stderr = s.Stderr
	}
	if s.TTY {
		opts.TerminalSizeQueue = newSizeQueue(ctx, s.Size, s.Resize)
	}
	return exitOf(pod, ex.StreamWithContext(ctx, opts))
}

// newExecutor is kubectl's: WebSocket (GET), falling back to SPDY (POST)
// when the upgrade is refused or a proxy cannot carry it.
func newExecutor(cfg *rest.Config, url string) (remotecommand.Executor, error) {
	u, err := neturl.Parse(url)
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		return nil, err
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", url)
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// exitOf turns the stream's end into the command's exit. A kubelet reports
// a non-zero exit as a status whose cause is the code (client-go's
// CodeExitError). Kubelets whose runtime wraps the process's exit in
// another error (kwok's, which runs the command on its own machine) report
// it only in the message, as Go's os/exec words it ("exit status 3",
// "signal: killed"); that is read too, so the code is not lost. A command
// the runtime cannot start is the shell's 127.
func exitOf(pod string, err error) error {
	if err == nil {
		return nil
	}
	var ce exec.CodeExitError
	if errors.As(err, &ce) {
		return &rankexec.ExitError{Code: ce.Code}
	}
	if ee := fromMessage(err.Error()); ee != nil {
		return ee
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errdefs.Unavailable("exec in pod %s: %v", pod, err)
}

var (
	exitStatusRE = regexp.MustCompile(`exit status (\d+)\s*$`)
	signalRE     = regexp.MustCompile(`signal: ([a-z ]+)\s*$`)
	notFoundRE   = regexp.MustCompile(`executable file not found|no such file or directory`)
)

// signals maps Go's names of signals ("killed") to their numbers.
var signals = func() map[string]int {
	m := map[string]int{}
	for n := 1; n < 32; n++ {
		m[syscall.Signal(n).String()] = n
	}
	return m
}()

func fromMessage(msg string) *rankexec.ExitError {
	if m := exitStatusRE.FindStringSubmatch(msg); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			return &rankexec.ExitError{Code: n}
		}
	}
	if m := signalRE.FindStringSubmatch(msg); m != nil {
		if n, ok := signals[m[1]]; ok {
			return &rankexec.ExitError{Code: 128 + n, Signal: n}
		}
	}
	if notFoundRE.MatchString(msg) {
		return &rankexec.ExitError{Code: rankexec.NotFoundCode}
	}
	return nil
}

// sizeQueue hands remotecommand the terminal's first size, then each resize.
type sizeQueue struct {
	ctx    context.Context
	first  *rankexec.TermSize
	resize <-chan rankexec.TermSize
}

func newSizeQueue(ctx context.Context, first *rankexec.TermSize, resize <-chan rankexec.TermSize) *sizeQueue {
	return &sizeQueue{ctx: ctx, first: first, resize: resize}
}

// Next blocks until the next size; nil ends the queue.
func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	if f := q.first; f != nil {
		q.first = nil
		return &remotecommand.TerminalSize{Width: f.Width, Height: f.Height}
	}
	if q.resize == nil {
		<-q.ctx.Done()
		return nil
	}
	select {
	case <-q.ctx.Done():
		return nil
	case s, ok := <-q.resize:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: s.Width, Height: s.Height}
	}
}
