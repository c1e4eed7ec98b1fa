package logtime

import "time"

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
