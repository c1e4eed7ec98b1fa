//go:build !linux

package logtime

import "errors"

// Watch needs inotify; elsewhere only the Marks a caller makes are recorded.
func (r *Recorder) Watch() error { return errors.New("logtime: watching a log needs Linux") }
