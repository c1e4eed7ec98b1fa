//go:build !linux

package logtime

import "time"

// markGap is the least time between two records (see watch_linux.go).
const markGap = 50 * time.Millisecond

// Watch looks at the log every markGap: only Linux reports writes here.
func (r *Recorder) Watch() error { return r.poll() }
