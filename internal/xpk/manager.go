package xpk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Runner runs a program to completion. A non-zero exit is not an error:
// it is reported in Result.ExitCode; err is for a program that could not
// be started or was cut off by ctx.
type Runner interface {
	Run(ctx context.Context, path string, args, env []string) (Result, error)
}

// Result is what a program printed and how it ended.
type Result struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// ExecRunner runs programs with os/exec. A cancelled context kills the
// program's whole process group: xpk starts gcloud and kubectl, which
// would otherwise outlive it.
type ExecRunner struct{}

var _ Runner = ExecRunner{}

// Run implements Runner.
func (ExecRunner) Run(ctx context.Context, path string, args, env []string) (Result, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	res := Result{Stdout: out.Bytes(), Stderr: errb.Bytes()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, ctx.Err()
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
		return res, nil
	}
	return res, err
}

// Manager is 001's XpkWorkloadManager.
type Manager struct {
	run     Runner
	now     func() time.Time
	timeout time.Duration
}

// Option configures a Manager.
type Option func(*Manager)

// WithRunner replaces os/exec (tests run a fake through the real one).
func WithRunner(r Runner) Option { return func(m *Manager) { m.run = r } }

// WithClock injects the clock of submitted_at.
func WithClock(now func() time.Time) Option { return func(m *Manager) { m.now = now } }

// WithTimeout bounds each command whose context has no deadline of its
// own (default 5 minutes: a create builds and uploads nothing when given
// --docker-image, but gcloud and kubectl may each take a while).
func WithTimeout(d time.Duration) Option { return func(m *Manager) { m.timeout = d } }

// New returns a Manager.
func New(opts ...Option) *Manager {
	m := &Manager{run: ExecRunner{}, now: time.Now, timeout: 5 * time.Minute}
	for _, o := range opts {
		o(m)
	}
	return m
}

// call runs xpk with args, within ctx's deadline or the manager's timeout.
// A timeout, or a program that cannot be started, is a
// *ClusterUnreachableError; a non-zero exit is returned for the caller to
// type.
func (m *Manager) call(ctx context.Context, c Cluster, verb string, args []string) (Result, error) {
	limit := m.timeout
	if dl, ok := ctx.Deadline(); ok {
		limit = time.Until(dl)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.timeout)
		defer cancel()
	}
	res, err := m.run.Run(ctx, c.path(), args, c.Env)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return res, &ClusterUnreachableError{Cluster: c.Name, Command: verb, TimedOut: true, Timeout: limit.Round(time.Millisecond), Stderr: string(res.Stderr)}
	case err != nil:
		return res, &ClusterUnreachableError{Cluster: c.Name, Command: verb, Err: fmt.Errorf("%s: %w", c.path(), err)}
	}
	return res, nil
}

// Submit runs `xpk workload create`. A non-zero exit is a
// *WorkloadSubmitError with xpk's stderr (and the end of its stdout, where
// xpk prints the failing step).
func (m *Manager) Submit(ctx context.Context, c Cluster, s WorkloadSpec) (WorkloadHandle, error) {
	args, err := CreateArgs(c, s)
	if err != nil {
		return WorkloadHandle{}, err
	}
	res, err := m.call(ctx, c, "workload create", args)
	if err != nil {
		return WorkloadHandle{}, err
	}
	if res.ExitCode != 0 {
		return WorkloadHandle{}, &WorkloadSubmitError{Cluster: c.Name, Workload: s.Name, ExitCode: res.ExitCode, Stderr: failureText(res)}
	}
	return WorkloadHandle{WorkloadName: s.Name, Cluster: c.Name, Namespace: cmpOr(s.Namespace, c.DefaultNamespace), SubmittedAt: m.now().UTC()}, nil
}

// List runs `xpk workload list` and reads its table; filter, when not
// empty, keeps the workloads in that state (001's state_filter). A
// non-zero exit is a *ClusterUnreachableError carrying stderr; output that
// cannot be read is a *OutputError.
func (m *Manager) List(ctx context.Context, c Cluster, filter State) ([]WorkloadInfo, error) {
	return m.list(ctx, c, "", filter)
}

func (m *Manager) list(ctx context.Context, c Cluster, job string, filter State) ([]WorkloadInfo, error) {
	res, err := m.call(ctx, c, "workload list", ListArgs(c, job))
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, &ClusterUnreachableError{Cluster: c.Name, Command: "workload list", ExitCode: res.ExitCode, Stderr: failureText(res)}
	}
	all, err := ParseList(c.Name, string(res.Stdout))
	if err != nil || filter == "" {
		return all, err
	}
	var out []WorkloadInfo
	for _, w := range all {
		if w.State == filter {
			out = append(out, w)
		}
	}
	return out, nil
}

// Status is 001's get_status: the workload's row of `xpk workload list`
// (narrowed by --filter-by-job, which matches by substring, so the row is
// picked by its exact name). No row is a *WorkloadNotFoundError.
func (m *Manager) Status(ctx context.Context, c Cluster, h WorkloadHandle) (WorkloadStatus, error) {
	rows, err := m.list(ctx, c, h.WorkloadName, "")
	if err != nil {
		return WorkloadStatus{}, err
	}
	for _, w := range rows {
		if w.Name != h.WorkloadName {
			continue
		}
		st := WorkloadStatus{WorkloadName: w.Name, State: w.State, StartTime: w.StartTime, Status: w.Status, Message: w.StatusMessage}
		if w.State == StateCompleted || w.State == StateFailed {
			st.EndTime = timeOf(w.StatusTime)
		}
		return st, nil
	}
	return WorkloadStatus{}, &WorkloadNotFoundError{Cluster: c.Name, Workload: h.WorkloadName}
}

// Cancel runs `xpk workload delete` and reports true once the workload is
// deleted. A workload xpk (kubectl, underneath) does not find is a
// *WorkloadNotFoundError: the caller logs it and carries on.
func (m *Manager) Cancel(ctx context.Context, c Cluster, h WorkloadHandle) (bool, error) {
	res, err := m.call(ctx, c, "workload delete", DeleteArgs(c, h.WorkloadName))
	if err != nil {
		return false, err
	}
	if res.ExitCode == 0 {
		return true, nil
	}
	text := failureText(res)
	if strings.Contains(text, "NotFound") || strings.Contains(text, "not found") {
		return false, &WorkloadNotFoundError{Cluster: c.Name, Workload: h.WorkloadName, Detail: text}
	}
	return false, &ClusterUnreachableError{Cluster: c.Name, Command: "workload delete", ExitCode: res.ExitCode, Stderr: text}
}

// failureText is what a failed xpk printed about its failure: stderr,
// where gcloud, kubectl and argparse write, and the last lines of stdout,
// where xpk itself logs the step that failed.
func failureText(res Result) string {
	stderr := strings.TrimSpace(string(res.Stderr))
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	stdout := strings.TrimSpace(strings.Join(lines, "\n"))
	switch {
	case stdout == "":
		return stderr
	case stderr == "":
		return stdout
	}
	return stderr + "\n" + stdout
}
