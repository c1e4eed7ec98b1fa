package logtime

import (
	"fmt"
	"syscall"
	"time"
)

// markGap is the least time between two records: a rank that logs
// without pause for a day leaves an index of 28 MB (twenty records of 16
// bytes a second), and its lines' times are at most this late.
const markGap = 50 * time.Millisecond

// Watch marks the log each time the kernel reports it written, until
// reading the kernel's reports fails. It runs for the life of the process
// that writes the index; Mark once more before that process ends dates the
// last lines.
func (r *Recorder) Watch() error {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	defer syscall.Close(fd)
	// The log by its descriptor: whatever its path, it is the file written.
	if _, err := syscall.InotifyAddWatch(fd, fmt.Sprintf("/proc/self/fd/%d", r.log.Fd()), syscall.IN_MODIFY); err != nil {
		return fmt.Errorf("watch the log: %w", err)
	}
	// What was written before the watch began reports nothing.
	if err := r.Mark(); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		if _, err := syscall.Read(fd, buf); err != nil {
			if err == syscall.EINTR {
				continue
			}
			return err
		}
		if err := r.Mark(); err != nil {
			return err
		}
		// Writes meanwhile coalesce into the kernel's next report, so a
		// rank that logs without pause wakes this at most once a gap.
		time.Sleep(markGap)
	}
}
