package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A `falcon dev` that stops, whether it crashes (SIGKILL) or is stopped
// (SIGTERM), leaves its local jobs running under their supervisors; the next
// `falcon dev` on the data dir adopts them and reports how they really end,
// with the job's whole log.
func TestRestartAdoptsRunningJobs(t *testing.T) {
	for _, tt := range []struct {
		name string
		sig  syscall.Signal
	}{{"crash", syscall.SIGKILL}, {"stop", syscall.SIGTERM}} {
		sig := tt.sig
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			// The rank blocks on the FIFO until the test lets it end.
			fifo := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			d := startDev(t, dir)
			exp := d.create(fmt.Sprintf("name: survivor\nrole_to_task_spec:\n  main:\n    command: 'echo before; read x < %s; echo after; exit 3'\n    replica: 1\n", fifo))
			id, jobID := exp["id"].(string), jobsOf(exp)[0]["id"].(string)
			d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
			logFile := filepath.Join(dir, "logs", jobID, jobID+"-0.log")
			eventually(t, "the rank to log its first line", func() bool {
				b, _ := os.ReadFile(logFile)
				return string(b) == "before\n"
			})
			pids := d.pids(jobID)

			d.kill(sig)
			for _, p := range pids {
				if !liveInGroup(p) {
					t.Fatalf("the rank's supervisor %d did not outlive falcon dev (%v)", p, sig)
				}
			}
			d2 := startDev(t, dir)
			if e := d2.mustJSON("exp", "get", id); e["status"] != "Running" {
				t.Fatalf("after the restart the experiment is %v, want it still Running: %v", e["status"], e)
			}

			release(t, fifo)
			e := d2.waitFor(id, "Failed", func(e map[string]any) bool { return e["status"] == "Failed" })
			job := jobsOf(e)[0]
			msg, _ := job["message"].(string)
			if job["status"] != "Failed" || job["reason"] != "JobFailed" || !strings.Contains(msg, "exited with code 3") {
				t.Errorf("job after the restart: %v; want Failed/JobFailed with the rank's exit code 3", job)
			}
			if strings.Contains(msg, "lost") {
				t.Errorf("job message %q calls a job that ran to its end lost", msg)
			}
			if b, _ := os.ReadFile(logFile); string(b) != "before\nafter\n" {
				t.Errorf("log file across the restart = %q, want both lines", b)
			}
			logs := d2.run("", "exp", "logs", id)
			before, after := strings.Index(logs.stdout, "before"), strings.Index(logs.stdout, "after")
			if logs.code != 0 || before < 0 || after < before {
				t.Errorf("exp logs across the restart: exit %d\n%s%s", logs.code, logs.stdout, logs.stderr)
			}
		})
	}
}

// A job that ends while no `falcon dev` runs is recorded, by the next one,
// as ending when its process exited (the time its supervisor wrote), not
// when the restarted server noticed; its experiment ends then too.
func TestRestartDatesAnEndItMissed(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir)
	type run struct {
		name, fifo, id, jobID, want string
	}
	runs := []*run{{name: "succeeds", want: "Succeeded"}, {name: "fails", want: "Failed"}}
	for _, r := range runs {
		r.fifo = filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(r.fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		code := 0
		if r.want == "Failed" {
			code = 3
		}
		exp := d.create(fmt.Sprintf("name: %s\nrole_to_task_spec:\n  main:\n    command: 'read x < %s; exit %d'\n    replica: 1\n", r.name, r.fifo, code))
		r.id, r.jobID = exp["id"].(string), jobsOf(exp)[0]["id"].(string)
	}
	for _, r := range runs {
		d.waitFor(r.id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
	}
	d.kill(syscall.SIGKILL)

	exited := map[string]time.Time{}
	for _, r := range runs {
		release(t, r.fifo)
		marker := filepath.Join(dir, "run", r.jobID, "0", "exit")
		var rec struct {
			Time time.Time `json:"time"`
		}
		eventually(t, "the exit marker of "+r.name, func() bool {
			b, err := os.ReadFile(marker)
			return err == nil && json.Unmarshal(b, &rec) == nil && !rec.Time.IsZero()
		})
		exited[r.id] = rec.Time.UTC().Truncate(time.Microsecond)
	}

	d2 := startDev(t, dir)
	for _, r := range runs {
		e := d2.waitFor(r.id, r.want, func(e map[string]any) bool { return e["status"] == r.want })
		job := jobsOf(e)[0]
		if got := timeField(t, job, "finished_at"); !got.Equal(exited[r.id]) {
			t.Errorf("%s: job finished_at %v, want its process's exit %v", r.name, got, exited[r.id])
		}
		if got := timeField(t, e, "finished_at"); !got.Equal(exited[r.id]) {
			t.Errorf("%s: experiment finished_at %v, want its job's end %v", r.name, got, exited[r.id])
		}
	}
}

// timeField is obj[key], a protojson timestamp.
func timeField(t *testing.T, obj map[string]any, key string) time.Time {
	t.Helper()
	s, _ := obj[key].(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s = %v: %v", key, obj[key], err)
	}
	return at
}

// release lets the process blocked reading fifo go on. Opening a FIFO for
// writing without blocking fails until a reader has it open.
func release(t *testing.T, fifo string) {
	t.Helper()
	var f *os.File
	eventually(t, "a reader of "+fifo, func() bool {
		var err error
		f, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		return err == nil
	})
	defer f.Close()
	if _, err := f.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it holds, for what nothing notifies about.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
