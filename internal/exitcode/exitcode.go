package exitcode

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Signal is the signal a shell's exit code says killed its command, if it
// says so: codes 129 to 128+64 that name a signal.
func Signal(code int) (syscall.Signal, bool) {
	if code <= 128 || code > 128+64 {
		return 0, false
	}
	sig := syscall.Signal(code - 128)
	return sig, unix.SignalName(sig) != ""
}

// Killed is what code says of how the command ended, for a Message:
// "killed by SIGTERM" for 143, "" for a code that names no signal. It is
// the shell's convention, which nearly every command Falcon runs goes
// through; a program may also exit with such a code by itself, rarely.
func Killed(code int) string {
	sig, ok := Signal(code)
	if !ok {
		return ""
	}
	return "killed by " + unix.SignalName(sig)
}
