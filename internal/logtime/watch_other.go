//go:build !linux

package logtime

// Watch looks at the log every markGap: only Linux reports writes here.
func (r *Recorder) Watch() error { return r.poll() }
