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

func (l layout) runDir() string             { return filepath.Join(l.root, "run") }
func (l layout) lockFile() string           { return filepath.Join(l.root, "run", ".lock") }
func (l layout) jobDir(job string) string   { return filepath.Join(l.root, "run", job) }
func (l layout) jobFile(job string) string  { return filepath.Join(l.jobDir(job), "job.json") }
func (l layout) stopFile(job string) string { return filepath.Join(l.jobDir(job), "stop") }
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

// stopRecord is a job's stop file: why Falcon is stopping the job's ranks.
// It is written before the first signal is sent, so whoever records a rank's
// end afterwards (its supervisor, or an executor after a restart) knows the
// rank died because Falcon stopped it, not on its own.
type stopRecord struct {
	End  string    `json:"end"` // endKilled or endSibling
	Time time.Time `json:"time"`
}

// How a rank ended, as recorded in its exit marker.
const (
	endExited      = "exited"         // on its own: exit code or signal
	endKilled      = "killed"         // Kill was called while it ran
	endSibling     = "sibling-failed" // stopped because another rank failed first
	endStartFailed = "start-failed"   // never ran
	// endUnrecorded: the rank's supervisor ended without writing the
	// marker (it was SIGKILLed, say), or the rank had no supervisor that
	// could be found; nobody knows the exit status.
	endUnrecorded = "unrecorded"

	// Written only by Falcon versions that stopped running jobs when they
	// shut down or restarted; kept so their data directories still read.
	endShutdown = "shutdown"
	endLost     = "lost"
)

// exitRecord is a rank's exit marker.
type exitRecord struct {
	End    string `json:"end"`              // one of the end* constants
	Code   *int   `json:"code,omitempty"`   // exit status, if the leader exited normally
	Signal int    `json:"signal,omitempty"` // signal number, if the leader died of a signal
	Pid    int    `json:"pid,omitempty"`    // the rank's supervisor pid (the pid file's), if it ever had one
	// Unwatched is set on an unrecorded end found when an executor loaded
	// the job: the rank ended while no Falcon process was running.
	Unwatched bool      `json:"unwatched,omitempty"`
	Detail    string    `json:"detail,omitempty"` // e.g. the start error
	Time      time.Time `json:"time"`
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
	return writeJSON(path, v, os.Rename)
}

// writeJSONNew is writeJSONAtomic that never replaces an existing file: it
// reports fs.ErrExist instead. An exit marker has two possible writers (the
// rank's supervisor, and the executor when the supervisor wrote none), and
// the first one's account must win.
func writeJSONNew(path string, v any) error {
	return writeJSON(path, v, func(tmp, path string) error {
		err := os.Link(tmp, path)
		os.Remove(tmp)
		return err
	})
}

func writeJSON(path string, v any, install func(tmp, path string) error) error {
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
		err = install(tmp, path)
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
