package local

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/falconhq/falcon/internal/logtime"
)

// A rank's supervisor is the process the executor starts for it: this same
// binary, re-executed through /proc/self/exe in a hidden mode that init
// recognises before main runs. It starts `/bin/sh -c "$Command"` in a process
// group of its own, waits for it, and writes the rank's exit marker. Because
// the supervisor does not depend on the Falcon process that started it (it
// leads a session of its own, so neither a terminal's Ctrl-C nor a hangup
// reaches it), a rank's exit status is recorded however often Falcon stops,
// and a restarted executor can adopt the rank instead of guessing.
//
// Being this binary, and selected in init, the mode needs no wiring: every
// binary that links the executor (falcon, and this package's tests) can also
// supervise.
const (
	supervisorEnv  = "FALCON_LOCAL_SUPERVISOR" // =1 in the supervisor only; stripped for the command
	supervisorArg0 = "falcon-rank-supervisor"  // argv[0]; what ps shows
	supervisorExe  = "/proc/self/exe"          // the running binary, even if its file was replaced since
)

// The executor speaks to a supervisor in signals, which the supervisor
// forwards to the rank's process group while it is safe to (its leader not
// yet reaped, so the group ID cannot have been recycled). SIGKILL cannot be
// caught, so sigKillGroup stands for it; a supervisor that is itself
// SIGKILLed cannot record anything.
const sigKillGroup = syscall.SIGUSR1

// readyFD is the write end of a pipe the executor passes to the supervisor.
// The supervisor writes one byte on it once it catches the executor's
// signals, and only then does the executor record its pid or signal it: a
// SIGTERM that arrived earlier would kill it with nothing recorded.
const readyFD = 3

// timesFD is the rank's log index (package logtime), opened for appending:
// the supervisor notes when the log grew while the rank runs.
const timesFD = 4

func init() {
	if os.Getenv(supervisorEnv) == "1" && len(os.Args) == 4 && os.Args[0] == supervisorArg0 {
		os.Exit(supervise(os.Args[1], os.Args[2], os.Args[3]))
	}
}

// supervisorArgs is the argument vector of a rank's supervisor.
func supervisorArgs(exitFile, stopFile, command string) []string {
	return []string{supervisorArg0, exitFile, stopFile, command}
}

// supervise runs command and records how it ended in exitFile. Its steps:
//  1. catch the signals the executor sends, before the command exists, so
//     none of them can kill the supervisor instead of the rank, and tell
//     the executor so (readyFD);
//  2. start the command in a process group of its own, with the
//     supervisor's stdout and stderr (the rank's log) and cwd, and note in
//     the log's index (timesFD) when the log grows, until the end;
//  3. forward SIGTERM, SIGINT and SIGHUP, and SIGKILL for sigKillGroup, to
//     the group while its leader runs;
//  4. once the leader exits, SIGKILL what it left in its group, as a pod's
//     processes die with its main container, then reap it;
//  5. write the exit marker atomically, with the end the job's stop file
//     names if Falcon was stopping the job (the signal came from Falcon),
//     and exit.
//
// It writes nothing to the log unless it cannot record the exit, which is
// then the only place left to say so.
func supervise(exitFile, stopFile, command string) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, sigKillGroup)
	if ready := os.NewFile(readyFD, "ready"); ready != nil {
		_, _ = ready.Write([]byte{1})
		ready.Close() // the command must not inherit it
	}
	self := os.Getpid()
	record := func(x exitRecord) int {
		if st, err := readStop(stopFile); err == nil && x.End == endExited {
			x.End = st.End
		}
		x.Pid, x.Time = self, time.Now()
		// Replacing, not writeJSONNew: nobody else writes the marker while
		// the supervisor lives, and a stray file of the task's (the rank
		// directory is its cwd) must not hide how it ended.
		if err := writeJSONAtomic(exitFile, x); err != nil {
			fmt.Fprintf(os.Stderr, "falcon: cannot record how this rank ended: %v\n", err)
			return 1
		}
		return 0
	}

	times := logTimes()
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Env = withoutVar(os.Environ(), supervisorEnv)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return record(exitRecord{End: endStartFailed, Detail: err.Error()})
	}
	pgid := cmd.Process.Pid

	var (
		mu      sync.Mutex
		exiting bool // set once the leader has exited; the group is ours to kill, not to forward to
	)
	go func() {
		for s := range sigs {
			sig := s.(syscall.Signal)
			if sig == sigKillGroup {
				sig = syscall.SIGKILL
			}
			mu.Lock()
			if !exiting {
				_ = syscall.Kill(-pgid, sig)
			}
			mu.Unlock()
		}
	}()

	if times != nil {
		go func() { _ = times.Watch() }()
	}
	werr := waitExited(pgid)
	mu.Lock()
	exiting = true
	mu.Unlock()
	if werr == nil {
		// The unreaped leader pins the group ID while its members die.
		if err := killGroup(pgid); err != nil {
			fmt.Fprintf(os.Stderr, "falcon: %v\n", err)
		}
	}
	err := cmd.Wait()
	if times != nil {
		_ = times.Mark() // the last lines' time, before the exit is told
	}
	x := exitRecord{End: endExited}
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			x.Signal = int(ws.Signal())
		} else {
			c := ps.ExitCode()
			x.Code = &c
		}
	} else {
		c := -1
		x.Code, x.Detail = &c, fmt.Sprintf("wait: %v", err)
	}
	return record(x)
}

func readStop(path string) (stopRecord, error) {
	var st stopRecord
	if err := readJSON(path, &st); err != nil {
		return st, err
	}
	if st.End == "" {
		return st, fmt.Errorf("%s: no end", path)
	}
	return st, nil
}

func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// logTimes is the recorder of the rank's log index, or nil when the
// executor passed none. The index descriptor is closed on exec, so the
// command never holds it.
func logTimes() *logtime.Recorder {
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, timesFD, syscall.F_GETFD, 0); errno != 0 {
		return nil // EBADF: not passed
	}
	syscall.CloseOnExec(timesFD)
	r, err := logtime.NewRecorder(os.Stdout, os.NewFile(timesFD, "log times"))
	if err != nil {
		return nil
	}
	return r
}
