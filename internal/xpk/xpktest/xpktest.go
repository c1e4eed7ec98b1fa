// Package xpktest builds the xpk test double (package fakexpk) for tests
// and reads what it was asked to do.
package xpktest

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	once     sync.Once
	dir      string
	path     string
	buildErr error
)

// Main runs a test binary's tests and removes the fake built for them.
func Main(m *testing.M) {
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// Binary builds fakexpk once per test binary and returns its path; tests
// run it as they would run xpk.
func Binary(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(here), "..", "fakexpk")
		dir, buildErr = os.MkdirTemp("", "fakexpk-")
		if buildErr != nil {
			return
		}
		path = filepath.Join(dir, "xpk")
		out, err := exec.Command("go", "build", "-o", path, src).CombinedOutput()
		if err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		tb.Fatalf("building fakexpk: %v", buildErr)
	}
	return path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// Invocations reads the arguments of every run logged to path
// (FAKEXPK_LOG), in order.
func Invocations(tb testing.TB, path string) [][]string {
	tb.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Args []string `json:"args"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			tb.Fatalf("invocation log %s: %v", path, err)
		}
		out = append(out, line.Args)
	}
	return out
}

// Row is a workload in the fake's state file, as xpk's table shows it.
type Row struct {
	Created    string `json:"created"`
	Priority   string `json:"priority"`
	Needed     string `json:"needed"`
	Running    string `json:"running"`
	Done       string `json:"done"`
	Status     string `json:"status"`
	Message    string `json:"message"`
	StatusTime string `json:"status_time"`
}

// WriteState seeds a state file (FAKEXPK_STATE) with rows by name.
func WriteState(tb testing.TB, path string, rows map[string]Row) {
	tb.Helper()
	data, err := json.Marshal(rows)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}
