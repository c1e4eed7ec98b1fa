package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var falconBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "falcon-e2e-bin")
	if err != nil {
		panic(err)
	}
	falconBin = filepath.Join(dir, "falcon")
	build := exec.Command("go", "build", "-o", falconBin, "../cmd/falcon")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building falcon:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// dev is a running `falcon dev`.
type dev struct {
	t       testing.TB
	dataDir string
	http    string
	grpc    string
	cmd     *exec.Cmd
	stderr  *bytes.Buffer
	exited  chan struct{} // closed once cmd has exited
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startDev starts `falcon dev` on a fresh data dir (or dataDir, to restart).
func startDev(t testing.TB, dataDir string) *dev { return startDevEnv(t, dataDir, nil) }

// startDevEnv is startDev with more environment for the server, such as
// STORAGE_EMULATOR_HOST, and more flags.
func startDevEnv(t testing.TB, dataDir string, env []string, flags ...string) *dev {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	// A free port is free when freeAddr closes it, not when falcon dev
	// binds it: another test's process may take it in between (the
	// packages' tests run side by side). Such a start is tried again on
	// new ports; any other failure fails the test at once.
	for try := 1; ; try++ {
		d := &dev{t: t, dataDir: dataDir, http: freeAddr(t), grpc: freeAddr(t)}
		d.launch(t, env, flags)
		err := d.waitUp(30 * time.Second)
		if err == nil {
			d.stopAtEnd(t, "falcon dev")
			return d
		}
		d.kill(syscall.SIGKILL)
		if try < 3 && strings.Contains(d.stderr.String(), "address already in use") {
			t.Logf("falcon dev lost its port to another process; starting it again on new ones:\n%s", d.stderr)
			continue
		}
		t.Fatalf("falcon dev did not come up: %v\n%s", err, d.stderr)
	}
}

// launch starts falcon dev on d's data dir and addresses; d.exited is
// closed once it has exited.
func (d *dev) launch(t testing.TB, env, flags []string) {
	t.Helper()
	d.stderr, d.exited = &bytes.Buffer{}, make(chan struct{})
	args := []string{"dev", "--data-dir", d.dataDir, "--http-addr", d.http, "--grpc-addr", d.grpc, "--log-level", "debug"}
	// More flags for every falcon dev of the run, such as --pprof for a
	// profile of a benchmark.
	args = append(args, strings.Fields(os.Getenv("FALCON_E2E_DEV_ARGS"))...)
	d.cmd = exec.Command(falconBin, append(args, flags...)...)
	d.cmd.Stderr = d.stderr
	if path := os.Getenv("FALCON_E2E_DEV_LOG"); path != "" {
		// Kept for a look at where a benchmark's time went; each falcon
		// dev of the run appends to it.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		d.cmd.Stderr = io.MultiWriter(d.stderr, f)
	}
	if env != nil {
		d.cmd.Env = append(os.Environ(), env...)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
}

// stopAtEnd stops falcon dev when t ends, if it still runs, and logs what
// it wrote if t failed.
func (d *dev) stopAtEnd(t testing.TB, name string) {
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			d.kill(syscall.SIGTERM)
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, d.stderr)
		}
	})
}

// waitUp waits until falcon dev answers /healthz, it exits, or within
// has passed.
func (d *dev) waitUp(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get("http://" + d.http + "/healthz")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-d.exited:
			return fmt.Errorf("it exited: %v", d.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// with returns a view of d that reports failures to t (a subtest).
func (d *dev) with(t testing.TB) *dev {
	c := *d
	c.t = t
	return &c
}

// kill stops falcon dev with sig and waits for it to exit.
func (d *dev) kill(sig syscall.Signal) {
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs the CLI against this dev server.
func (d *dev) run(stdin string, args ...string) result {
	d.t.Helper()
	cmd := exec.Command(falconBin, args...)
	cmd.Env = append(os.Environ(), "FALCON_SERVER=http://"+d.http)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("falcon %v: %v", args, err)
	}
	return r
}

// runTo runs the CLI with its stdout going to out (io.Discard for output
// too large to keep); stderr is kept.
func (d *dev) runTo(out io.Writer, args ...string) result {
	d.t.Helper()
	cmd := exec.Command(falconBin, args...)
	cmd.Env = append(os.Environ(), "FALCON_SERVER=http://"+d.http)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &errb
	err := cmd.Run()
	r := result{stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("falcon %v: %v", args, err)
	}
	return r
}

// mustJSON runs a command with -o json and decodes stdout.
func (d *dev) mustJSON(args ...string) map[string]any {
	d.t.Helper()
	r := d.run("", append(args, "-o", "json")...)
	if r.code != 0 {
		d.t.Fatalf("falcon %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		d.t.Fatalf("falcon %v: stdout is not JSON: %v\n%s", args, err, r.stdout)
	}
	return m
}

// create writes manifest to a file and creates the experiment, returning its JSON.
func (d *dev) create(manifest string) map[string]any {
	d.t.Helper()
	f := filepath.Join(d.t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		d.t.Fatal(err)
	}
	return d.mustJSON("exp", "create", "-f", f)
}

// waitFor polls the experiment until cond holds or the deadline passes.
func (d *dev) waitFor(id string, what string, cond func(exp map[string]any) bool) map[string]any {
	d.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var exp map[string]any
	for time.Now().Before(deadline) {
		exp = d.mustJSON("exp", "get", id)
		if cond(exp) {
			return exp
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.t.Fatalf("experiment %s never became %s; last: %v", id, what, exp)
	return nil
}

func jobsOf(exp map[string]any) []map[string]any {
	var out []map[string]any
	for _, j := range exp["jobs"].([]any) {
		out = append(out, j.(map[string]any))
	}
	return out
}

// pids reads the process-group IDs the local backend recorded for a job.
func (d *dev) pids(jobID string) []int {
	matches, _ := filepath.Glob(filepath.Join(d.dataDir, "run", jobID, "*", "pid"))
	var out []int
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var rec struct {
			Pid int `json:"pid"`
		}
		if err := json.Unmarshal(b, &rec); err == nil && rec.Pid > 0 {
			out = append(out, rec.Pid)
		}
	}
	return out
}

// groupAlive reports whether any live (non-zombie) process is in the process
// group. Zombies are ignored: killed grandchildren are reparented to PID 1
// and linger until it reaps them, but they run nothing. It allows a few
// seconds for the kill to land.
func groupAlive(pgid int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if !liveInGroup(pgid) {
			return false
		}
		if time.Now().After(deadline) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func liveInGroup(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state ppid pgrp ...
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		var state string
		var ppid, pgrp int
		if _, err := fmt.Sscan(rest, &state, &ppid, &pgrp); err == nil && pgrp == pgid && state != "Z" {
			return true
		}
	}
	return false
}
