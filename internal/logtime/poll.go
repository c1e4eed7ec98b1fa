package logtime

import "time"

// markGap is the least time between two records: a rank that logs
// without pause for a day leaves an index of 28 MB (twenty records of 16
// bytes a second), and its lines' times are at most this late.
const markGap = 50 * time.Millisecond

// poll marks the log every markGap, for where the kernel reports no
// writes; it returns when the log can no longer be read.
func (r *Recorder) poll() error {
	t := time.NewTicker(markGap)
	defer t.Stop()
	for range t.C {
		if err := r.Mark(); err != nil {
			return err
		}
	}
	return nil
}
