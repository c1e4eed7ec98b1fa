package logtime

import (
	"fmt"
	"syscall"
	"time"
)

// Watch marks the log each time the kernel reports it written, for the
// life of the process that writes the index; Mark once more before that
// process ends dates the last lines. Where the kernel will not watch (a
// user holds at most fs.inotify.max_user_instances watchers, 128 by
// default, and a falcon dev of many ranks can pass that), it looks every
// markGap instead: the same times, a wake-up each gap. It returns only
// when the log can no longer be read.
func (r *Recorder) Watch() error {
	fd, err := r.watchFD()
	if err != nil {
		return r.poll()
	}
	// The kernel's reports are read beside the marks: reports that come
	// while a mark waits for its turn coalesce into one wake.
	wake := make(chan struct{}, 1)
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		defer syscall.Close(fd)
		buf := make([]byte, 4096)
		for {
			if _, err := syscall.Read(fd, buf); err != nil && err != syscall.EINTR {
				return
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	next := time.Now()
	for {
		select {
		case <-wake:
		case <-gone:
			return r.poll() // the reports stopped: look instead
		}
		// A rank that logs without pause is marked once a gap, not on
		// every write.
		if wait := time.Until(next); wait > 0 {
			t := time.NewTimer(wait)
			<-t.C
		}
		if err := r.Mark(); err != nil {
			return err
		}
		next = time.Now().Add(markGap)
	}
}

// watchFD is an inotify descriptor reporting the log's writes, after a
// Mark of what was written before the watch began (that reports nothing).
func (r *Recorder) watchFD() (int, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("inotify: %w", err)
	}
	// The log by its descriptor: whatever its path, it is the file written.
	if _, err := syscall.InotifyAddWatch(fd, fmt.Sprintf("/proc/self/fd/%d", r.log.Fd()), syscall.IN_MODIFY); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("watch the log: %w", err)
	}
	if err := r.Mark(); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}
