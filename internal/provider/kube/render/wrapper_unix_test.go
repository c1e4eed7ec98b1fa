//go:build unix

package render

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The log wrapper runs here under the real /bin/sh, as it would in a pod,
// with the log directory in a temp dir instead of the GCS FUSE mount.

type wrapperRun struct {
	cmd    *exec.Cmd
	stdout *bytes.Buffer
	log    string
}

// startWrapper runs the wrapper for command; a non-empty existingLog is
// the rank's log file from an earlier attempt.
func startWrapper(t *testing.T, command string, drain time.Duration, existingLog string) *wrapperRun {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "job-abc123xyz0-2.log")
	if existingLog != "" {
		if err := os.WriteFile(log, []byte(existingLog), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/bin/sh", "-c", logWrapper(dir, drain), "falcon-task", command)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "FALCON_JOB_ID=job-abc123xyz0", "FALCON_RANK=2"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group, so cleanup also reaps what the command left behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return &wrapperRun{cmd: cmd, stdout: &out, log: log}
}

// logText returns the log file's content, "" while it does not exist.
func (w *wrapperRun) logText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(w.log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// wait returns the wrapper's exit status, failing the test if it takes
// longer than limit.
func (w *wrapperRun) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		default:
			t.Fatal(err)
		}
	case <-time.After(limit):
		t.Fatalf("wrapper still running after %s; log so far:\n%s", limit, w.logText(t))
	}
	return -1
}

func TestLogWrapperKeepsExitStatusAndCopiesOutput(t *testing.T) {
	w := startWrapper(t, "echo out; echo err >&2; exit 3", time.Second, "")
	if rc := w.wait(t, 10*time.Second); rc != 3 {
		t.Errorf("exit status %d, want the command's 3", rc)
	}
	if got := w.logText(t); got != "out\nerr\n" {
		t.Errorf("log file = %q, want stdout and stderr in order", got)
	}
	if got := w.stdout.String(); got != "out\nerr\n" {
		t.Errorf("container output = %q, want the same lines (kubectl logs)", got)
	}
}

func TestLogWrapperAppends(t *testing.T) {
	w := startWrapper(t, "echo second", time.Second, "first\n")
	if rc := w.wait(t, 10*time.Second); rc != 0 {
		t.Fatalf("exit status %d", rc)
	}
	if got := w.logText(t); got != "first\nsecond\n" {
		t.Errorf("log file = %q, want the new output appended", got)
	}
}

func TestLogWrapperForwardsSIGTERM(t *testing.T) {
	w := startWrapper(t, `trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done`, time.Second, "")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(w.logText(t), "ready") {
		if time.Now().After(deadline) {
			t.Fatal("command never printed ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// What the kubelet does on an abort: SIGTERM to the container's PID 1.
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if rc := w.wait(t, 10*time.Second); rc != 7 {
		t.Errorf("exit status %d, want the command's own 7 from its TERM trap", rc)
	}
	if got := w.logText(t); !strings.Contains(got, "got-term") {
		t.Errorf("log file = %q, want the command's last words", got)
	}
}

func TestLogWrapperDoesNotWaitForDaemons(t *testing.T) {
	// The background sleep inherits the FIFO and keeps it open; the wrapper
	// must still end once the command has, after the drain period.
	w := startWrapper(t, "sleep 30 & echo started", time.Second, "")
	start := time.Now()
	if rc := w.wait(t, 10*time.Second); rc != 0 {
		t.Errorf("exit status %d, want 0", rc)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("wrapper took %s with a 1s drain", took)
	}
	if got := w.logText(t); got != "started\n" {
		t.Errorf("log file = %q", got)
	}
}
