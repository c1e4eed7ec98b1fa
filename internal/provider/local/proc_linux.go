package local

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// procInfo is what the executor needs from /proc/<pid>/stat.
type procInfo struct {
	pid   int
	state byte
	ppid  int
	pgrp  int
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
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[2] field 5 (pgrp), f[19] field 22 (starttime).
	if len(f) < 20 || len(f[0]) != 1 {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return procInfo{pid: pid, state: f[0][0], ppid: ppid, pgrp: pgrp, start: start}, nil
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

func platformSupported() error { return nil }
