package local

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// procInfo is what the executor needs from /proc/<pid>/stat.
type procInfo struct {
	pid   int
	state byte
	ppid  int
	pgrp  int
	sid   int    // session ID: a supervisor leads a session of its own
	start uint64 // clock ticks after boot; with the boot ID it names a process uniquely
}

// live reports whether the process still runs code. A zombie has finished
// and only waits for its parent (which may be an init that never reaps), so
// it counts as gone.
func (p procInfo) live() bool { return p.state != 'Z' && p.state != 'X' && p.state != 'x' }

func readProc(pid int) (procInfo, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, err
	}
	return parseStat(pid, b)
}

// parseStat parses /proc/<pid>/stat. The command name (field 2) is wrapped in
// parentheses and may itself contain spaces and parentheses, so the fixed
// fields are counted from the last ')'.
func parseStat(pid int, b []byte) (procInfo, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[2] field 5 (pgrp),
	// f[3] field 6 (session), f[19] field 22 (starttime).
	if len(f) < 20 || len(f[0]) != 1 {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	sid, err3 := strconv.Atoi(f[3])
	start, err4 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return procInfo{pid: pid, state: f[0][0], ppid: ppid, pgrp: pgrp, sid: sid, start: start}, nil
}

// scanProcs lists every process this user can see. Processes that vanish
// while the list is read are skipped.
func scanProcs() ([]procInfo, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	procs := make([]procInfo, 0, len(entries))
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if p, err := readProc(pid); err == nil {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// environHas reports whether the environment pid was exec'd with contains
// every one of vars ("KEY=value"). Unreadable environments (another user's
// process, a zombie) contain nothing.
func environHas(pid int, vars ...string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil || len(b) == 0 {
		return false
	}
	have := make(map[string]bool)
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		have[string(kv)] = true
	}
	for _, v := range vars {
		if !have[v] {
			return false
		}
	}
	return true
}

// bootID changes at every boot, so a pid file from an earlier boot is known
// to name no living process at all.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

const pPID = 1 // idtype_t P_PID for waitid(2)

// waitExited blocks until the child pid has exited but leaves it unreaped
// (WNOWAIT). While the exited leader is a zombie its pid, and so its process
// group ID, cannot be reused, which makes it safe to signal the group one last
// time before reaping.
func waitExited(pid int) error {
	var info [128]byte // siginfo_t; contents unused
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return errno
		}
	}
}

// lockDir takes an exclusive POSIX record lock on f, without waiting. The
// kernel drops it when the process dies, so a crashed Falcon never leaves a
// stale lock. Unlike flock, a record lock is not shared with children forked
// while it is held, so it is released the moment f is closed, not when the
// last child forked meanwhile gets around to exec. It does not exclude other
// Executors in this process; New checks those itself.
func lockDir(f *os.File) error {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 0} // the whole file
	err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
		return errDataDirInUse
	}
	return err
}

// killGroup SIGKILLs process group pgid until no live member is left, for at
// most killWait. The caller must pin pgid (its leader is an unreaped zombie
// of the caller), or the ID could name a recycled group.
func killGroup(pgid int) error {
	deadline := time.Now().Add(killWait)
	for {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		procs, err := scanProcs()
		if err != nil || !slices.ContainsFunc(procs, func(p procInfo) bool { return p.pgrp == pgid && p.live() }) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of group %d survive SIGKILL", pgid)
		}
		time.Sleep(pollInterval)
	}
}

// Syscall numbers shared by every Linux architecture (they were added after
// the tables were unified).
const (
	sysPidfdSendSignal = 424
	sysPidfdOpen       = 434
)

// pidfd is a handle on one process. Unlike a pid it can never come to name
// another process, so an adopted supervisor (not our child, so not pinned by
// us as a zombie) can be signalled and watched without the risk of reaching
// whatever process reuses its pid.
type pidfd struct{ f *os.File }

func openPidfd(pid int) (*pidfd, error) {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno != 0 {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, errno)
	}
	// Non-blocking, so os.NewFile hands it to the runtime poller and wait
	// parks a goroutine, not a thread, and ends when the file is closed.
	if err := syscall.SetNonblock(int(fd), true); err != nil {
		syscall.Close(int(fd))
		return nil, err
	}
	return &pidfd{f: os.NewFile(fd, fmt.Sprintf("pidfd:%d", pid))}, nil
}

func (p *pidfd) signal(sig syscall.Signal) error {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		if _, _, errno := syscall.Syscall6(sysPidfdSendSignal, fd, uintptr(sig), 0, 0, 0, 0); errno != 0 {
			serr = errno
		}
	}); err != nil {
		return err
	}
	return serr
}

// wait returns nil once the process has exited (a zombie counts), or an
// error once p is closed.
func (p *pidfd) wait() error {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Read(func(fd uintptr) bool {
		// A pidfd is readable once its process has exited.
		pfd := struct {
			fd             int32
			events, revent int16
		}{fd: int32(fd), events: 0x1} // POLLIN
		n, _, errno := syscall.Syscall(syscall.SYS_POLL, uintptr(unsafe.Pointer(&pfd)), 1, 0)
		return errno == 0 && n == 1
	})
}

func (p *pidfd) close() { p.f.Close() }

// platformSupported checks for pidfds (Linux 5.3), without which adopted
// ranks could not be watched safely.
func platformSupported() error {
	p, err := openPidfd(os.Getpid())
	if err != nil {
		return fmt.Errorf("the local executor needs pidfd_open (Linux 5.3 or later): %w", err)
	}
	p.close()
	return nil
}
