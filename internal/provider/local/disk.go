package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// layout names every path under the data directory (see the package doc).
type layout struct{ root string }

func (l layout) runDir() string            { return filepath.Join(l.root, "run") }
func (l layout) lockFile() string          { return filepath.Join(l.root, "run", ".lock") }
func (l layout) jobDir(job string) string  { return filepath.Join(l.root, "run", job) }
func (l layout) jobFile(job string) string { return filepath.Join(l.jobDir(job), "job.json") }
func (l layout) rankDir(job string, r int) string {
	return filepath.Join(l.jobDir(job), strconv.Itoa(r))
}
func (l layout) pidFile(job string, r int) string { return filepath.Join(l.rankDir(job, r), "pid") }
func (l layout) exitFile(job string, r int) string {
	return filepath.Join(l.rankDir(job, r), "exit")
}
func (l layout) logDir(job string) string       { return filepath.Join(l.root, "logs", job) }
func (l layout) logFile(job, pod string) string { return filepath.Join(l.logDir(job), pod+".log") }
func (l layout) artifactDir(exp, art string) string {
	return filepath.Join(l.root, "experiments", exp, "artifacts", art)
}

// jobRecord is job.json. Its existence is what makes a job known, so it is
// written before the first process starts. It deliberately omits the command
// and the env vars, which may hold secrets.
type jobRecord struct {
	JobID      string    `json:"jobID"`
	ExpID      string    `json:"expID"`
	ArtifactID string    `json:"artifactID"`
	Role       string    `json:"role"`
	Replica    int       `json:"replica"`
	Created    time.Time `json:"created"`
}

// pidRecord is a rank's pid file. Pid alone could name a different process
// after the pid is recycled; (BootID, Pid, StartTicks) cannot.
type pidRecord struct {
	Pid        int       `json:"pid"`        // also the process group ID (Setpgid)
	StartTicks uint64    `json:"startTicks"` // field 22 of /proc/<pid>/stat
	BootID     string    `json:"bootID"`
	Started    time.Time `json:"started"`
}

// How a rank ended, as recorded in its exit marker.
const (
	endExited      = "exited"         // on its own: exit code or signal
	endKilled      = "killed"         // Kill was called while it ran
	endSibling     = "sibling-failed" // stopped because another rank failed first
	endShutdown    = "shutdown"       // stopped by Shutdown/Close
	endLost        = "lost"           // Falcon died while it ran; found by Recover
	endStartFailed = "start-failed"   // never ran
)

// exitRecord is a rank's exit marker.
type exitRecord struct {
	End    string    `json:"end"`              // one of the end* constants
	Code   *int      `json:"code,omitempty"`   // exit status, if the leader exited normally
	Signal int       `json:"signal,omitempty"` // signal number, if the leader died of a signal
	Pid    int       `json:"pid,omitempty"`    // the leader's pid, if it ever had one
	Detail string    `json:"detail,omitempty"` // e.g. the start error
	Time   time.Time `json:"time"`
}

// exitCode is the rank's exit code in the shell's convention (128+n for
// signal n), or nil if it never exited under our watch.
func (r *exitRecord) exitCode() *int {
	switch {
	case r.Code != nil:
		c := *r.Code
		return &c
	case r.Signal != 0:
		c := 128 + r.Signal
		return &c
	}
	return nil
}

// logCode is exitCode for a logger, which would print the pointer.
func (r *exitRecord) logCode() any {
	if c := r.exitCode(); c != nil {
		return *c
	}
	return "none"
}

func (r *exitRecord) succeeded() bool { return r.End == endExited && r.Code != nil && *r.Code == 0 }

// rootCause reports whether this rank's end explains a failed job by itself,
// as opposed to being a consequence of another rank's failure.
func (r *exitRecord) rootCause() bool {
	switch r.End {
	case endExited:
		return !r.succeeded()
	case endSibling:
		return false
	}
	return true
}

// writeJSONAtomic writes v to path through a temp file in the same directory
// and a rename, so a crash leaves either the old file or the new one, never a
// torn one that would make a finished job look unfinished.
func writeJSONAtomic(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readJSON reads path into v. A missing file is reported as fs.ErrNotExist.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	return nil
}

func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
