package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/rankexec"
)

// ptyDrain bounds how long the output of a terminal session is read after
// its command exits: a background process the command left behind may hold
// the terminal open for ever.
const ptyDrain = 2 * time.Second

// Exec runs s beside a running rank, as `kubectl exec` runs a command in
// the rank's container: in the rank's working directory, with the
// environment its process was started with (read back from its
// supervisor, so the task's env vars, Falcon's and FALCON_ARTIFACT_DIR are
// the same), in a process group of its own that is killed when ctx ends.
// It returns nil when the command exits 0 and a *rankexec.ExitError
// otherwise; a command that cannot be started is the shell's 127, with
// the reason on s.Stderr. A rank that is unknown or has ended is a
// FailedPrecondition.
func (e *Executor) Exec(ctx context.Context, jobID string, rankIndex int, s rankexec.Session) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if !validName(jobID) {
		return errdefs.Precondition("job %s is not known to the local executor", jobID)
	}
	j, err := e.acquire(ctx, jobID, nil)
	if err != nil {
		return err
	}
	if j == nil {
		return errdefs.Precondition("job %s has no processes on this machine", jobID)
	}
	pid, err := j.runningPid(rankIndex)
	if err != nil {
		return err
	}
	env, err := supervisorEnviron(pid)
	if err != nil {
		return errdefs.Precondition("rank %d of job %s: its environment cannot be read (%v); has it just ended?", rankIndex, jobID, err)
	}
	path, err := lookPath(s.Command[0], env)
	if err != nil {
		w := s.Stderr
		if s.TTY {
			w = s.Stdout
		}
		fmt.Fprintf(w, "falcon: %v\n", err)
		return &rankexec.ExitError{Code: rankexec.NotFoundCode}
	}
	cmd := &exec.Cmd{Path: path, Args: s.Command, Env: env, Dir: e.layout.rankDir(jobID, rankIndex)}
	if s.TTY {
		return runTTY(ctx, cmd, s)
	}
	return runPiped(ctx, cmd, s)
}

// runningPid is the supervisor pid of a rank that has not ended.
func (j *job) runningPid(index int) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range j.ranks {
		if r.index != index {
			continue
		}
		if r.exit != nil {
			return 0, errdefs.Precondition("rank %d of job %s has ended (%s at %s)", index, j.id, r.exit.End, r.exit.Time.UTC().Format(time.RFC3339))
		}
		if r.pid == 0 {
			return 0, errdefs.Precondition("rank %d of job %s has no process to exec beside", index, j.id)
		}
		return r.pid, nil
	}
	return 0, errdefs.Precondition("job %s has no rank %d (%d ranks)", j.id, index, len(j.ranks))
}

// supervisorEnviron is the environment the rank's supervisor was started
// with, which it handed to the rank's command, less its own marker.
func supervisorEnviron(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, errors.New("empty environment (the process is exiting)")
	}
	var env []string
	for kv := range bytes.SplitSeq(bytes.TrimRight(b, "\x00"), []byte{0}) {
		env = append(env, string(kv))
	}
	return withoutVar(env, supervisorEnv), nil
}

// lookPath finds name on the PATH of env, the rank's, not Falcon's. A
// name with a slash is a path, relative to the rank's directory.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return lookIn(name, path)
}

// lookIn is exec.LookPath over the directories of path.
func lookIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + name
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}

func runPiped(ctx context.Context, cmd *exec.Cmd, s rankexec.Session) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	// Output pipes a background process keeps open must not hold the
	// session once the command itself has exited.
	cmd.WaitDelay = ptyDrain
	var stdin io.WriteCloser
	if s.Stdin != nil {
		var err error
		if stdin, err = cmd.StdinPipe(); err != nil {
			return err
		}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer killGroupWhenDone(ctx, cmd.Process.Pid)()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(stdin, s.Stdin)
			_ = stdin.Close()
		}()
	}
	return exitOf(cmd.Wait())
}

// killGroupWhenDone SIGKILLs the process group pgid when ctx ends before
// the returned func is called: the caller hung up, and nothing the
// session started may outlive it.
func killGroupWhenDone(ctx context.Context, pgid int) func() {
	stop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		case <-stop:
		}
	}()
	return func() { close(stop) }
}

func runTTY(ctx context.Context, cmd *exec.Cmd, s rankexec.Session) error {
	var ws *pty.Winsize
	if s.Size != nil {
		ws = &pty.Winsize{Cols: s.Size.Width, Rows: s.Size.Height}
	}
	ptmx, err := pty.StartWithSize(cmd, ws)
	if err != nil {
		return err
	}
	defer ptmx.Close()
	// pty.Start made the command a session leader: its pid is its
	// group's.
	defer killGroupWhenDone(ctx, cmd.Process.Pid)()
	stop := make(chan struct{})
	defer close(stop)
	if s.Resize != nil {
		go func() {
			for {
				select {
				case <-stop:
					return
				case sz, ok := <-s.Resize:
					if !ok {
						return
					}
					_ = pty.Setsize(ptmx, &pty.Winsize{Cols: sz.Width, Rows: sz.Height})
				}
			}
		}()
	}
	if s.Stdin != nil {
		go func() { _, _ = io.Copy(ptmx, s.Stdin) }()
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(s.Stdout, ptmx) })
	werr := cmd.Wait()
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(ptyDrain):
		_ = ptmx.Close()
		<-drained
	}
	return exitOf(werr)
}

// exitOf is how the command ended, in the shell's convention.
func exitOf(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		n := int(ws.Signal())
		return &rankexec.ExitError{Code: 128 + n, Signal: n}
	}
	return &rankexec.ExitError{Code: ee.ExitCode()}
}
