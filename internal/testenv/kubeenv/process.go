package kubeenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// process is one control-plane component run as a child in its own process
// group, with stdout and stderr appended to dir/logs/<name>.log. Killing the
// group rather than the pid means nothing the component forks survives it,
// and Pdeathsig means nothing survives the test binary being killed.
type process struct {
	name    string
	path    string
	args    []string
	env     []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	err  error         // cmd.Wait's result, once done is closed
}

func newProcess(dir, name, binDir string, args, env []string) *process {
	return &process{
		name:    name,
		path:    filepath.Join(binDir, name),
		args:    args,
		env:     env,
		logPath: filepath.Join(dir, "logs", name+".log"),
	}
}

// start runs the component. A process may be started again after stop: the
// log file is appended to, with a marker line between runs.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is already running", p.name)
		}
	}
	if err := os.MkdirAll(filepath.Dir(p.logPath), 0o755); err != nil {
		return err
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logFile, "=== kubeenv: %s starting at %s\n", p.name, time.Now().Format(time.RFC3339Nano))

	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.err = cmd, done, nil
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// exited reports whether the last run has ended, and how.
func (p *process) exited() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return true, nil
	}
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, waits up to grace for the
// component to exit, then sends SIGKILL. It returns once the process is gone.
func (p *process) stop(grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	pgid := cmd.Process.Pid
	select {
	case <-done:
		// The leader is gone; make sure nothing it forked is left either.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return
	default:
	}
	if grace > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-done:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-done
}

// tail returns up to the last n lines of the component's log.
func (p *process) tail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return lastLines(data, n)
}

func lastLines(data []byte, n int) string {
	data = bytes.TrimRight(data, "\n")
	end := len(data)
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(data[:end], '\n')
		if j < 0 {
			return string(data)
		}
		end = j
	}
	return string(data[end+1:])
}

// errExited is returned while waiting for a component that has died.
var errExited = errors.New("exited")

// copyTail writes the last n lines of each log to w, headed by its name.
func copyTail(w io.Writer, n int, procs ...*process) {
	for _, p := range procs {
		fmt.Fprintf(w, "--- %s (last %d lines of %s)\n%s\n", p.name, n, p.logPath, p.tail(n))
	}
}
