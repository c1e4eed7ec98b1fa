package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/testenv/syncbuf"
)

// Followers across a restart: `exp events -f`, `exp wait` and `exp logs -f`
// started against one `falcon dev` keep going when it is killed (or
// stopped) and another starts on the same data dir and addresses. Each
// resumes after what it last received, so the events arrive in order with
// none missing or repeated, the wait returns with the experiment's outcome,
// and the log shows every line once.
func TestFollowersSurviveARestart(t *testing.T) {
	for _, tt := range []struct {
		name string
		sig  syscall.Signal
	}{{"crash", syscall.SIGKILL}, {"stop", syscall.SIGTERM}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			d := startDev(t, dir)
			exp := d.create(fmt.Sprintf("name: followed\nrole_to_task_spec:\n  main:\n    command: 'echo one; echo two; read x < %s; echo three; echo four'\n    replica: 1\n", fifo))
			id, jobID := exp["id"].(string), jobsOf(exp)[0]["id"].(string)

			events := d.background("exp", "events", id, "-f", "-o", "json")
			wait := d.background("exp", "wait", id, "--progress", "--timeout", "3m")
			logs := d.background("exp", "logs", id, "-f", "-o", "table")
			logFile := filepath.Join(dir, "logs", jobID, jobID+"-0.log")
			eventually(t, "the rank's first lines", func() bool {
				b, _ := os.ReadFile(logFile)
				return string(b) == "one\ntwo\n"
			})
			eventually(t, "logs -f to print them", func() bool {
				if logs.stdout() != "one\ntwo\n" && strings.Count(logs.stdout(), "\n") >= 2 {
					t.Fatalf("logs -f printed %q\n%s", logs.stdout(), logs.stderr())
				}
				return logs.stdout() == "one\ntwo\n"
			})
			eventually(t, "events -f to see the job run", func() bool { return strings.Contains(events.stdout(), `"status":"Running"`) })

			d.kill(tt.sig)
			time.Sleep(time.Second) // the followers see the server gone and retry
			d2 := restartDev(t, d)
			release(t, fifo)

			for _, p := range []*bgProc{events, wait, logs} {
				if code := p.wait(t, 90*time.Second); code != 0 {
					t.Errorf("falcon %v: exit %d\nstdout:\n%s\nstderr:\n%s", p.args, code, p.stdout(), p.stderr())
				}
			}
			// Each saw the server go and resumed.
			for p, says := range map[*bgProc]string{events: "resuming", wait: "resuming until the timeout", logs: "resuming"} {
				if !strings.Contains(p.stderr(), says) {
					t.Errorf("falcon %v did not say it resumed:\n%s", p.args, p.stderr())
				}
			}
			if got := logs.stdout(); got != "one\ntwo\nthree\nfour\n" {
				t.Errorf("logs -f across the restart printed %q, want every line once", got)
			}
			if !strings.Contains(wait.stdout(), "Succeeded") {
				t.Errorf("wait printed:\n%s", wait.stdout())
			}

			followed := parseEvents(t, events.stdout())
			for i, e := range followed {
				if e.Seq != int64(i+1) {
					t.Fatalf("event %d has seq %d: events missing or repeated\n%s", i, e.Seq, events.stdout())
				}
			}
			if last := followed[len(followed)-1]; last.Kind != "experiment" || last.Status != "Succeeded" {
				t.Errorf("the followed stream ends with %+v, want the experiment's success", last)
			}
			// What was followed is the history as the server keeps it.
			r := d2.run("", "exp", "events", id, "-o", "json")
			history := parseEvents(t, r.stdout)
			if r.code != 0 || len(history) < len(followed) {
				t.Fatalf("exp events: exit %d, %d events, followed %d\n%s", r.code, len(history), len(followed), r.stderr)
			}
			for i := range followed {
				if followed[i] != history[i] {
					t.Errorf("event %d followed as %+v, kept as %+v", i+1, followed[i], history[i])
				}
			}
		})
	}
}

// --all returns 7 as soon as one experiment fails, while another still
// runs; --any returns with the first to end.
func TestWaitSeveral(t *testing.T) {
	d := startDev(t, "")
	id := func(name, command string) string {
		return d.create(fmt.Sprintf("name: %s\nrole_to_task_spec:\n  main:\n    command: '%s'\n    replica: 1\n", name, command))["id"].(string)
	}
	slow, fails, quick := id("slow", "sleep 120"), id("fails", "exit 3"), id("quick", "true")

	start := time.Now()
	r := d.run("", "exp", "wait", slow, fails, quick, "--timeout", "2m")
	if r.code != 7 || !strings.Contains(r.stderr, fails) || time.Since(start) > time.Minute {
		t.Errorf("wait --all with a failure: exit %d after %s\n%s", r.code, time.Since(start), r.stderr)
	}
	r = d.run("", "exp", "wait", slow, quick, "--any", "-o", "json", "--timeout", "2m")
	var got map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || got["id"] != quick {
		t.Errorf("wait --any: exit %d, stdout %s\n%s", r.code, r.stdout, r.stderr)
	}
	r = d.run("", "exp", "wait", slow, "--timeout", "1s")
	if r.code != 8 || !strings.Contains(r.stderr, "last seen status Running") {
		t.Errorf("wait --timeout 1s: exit %d\n%s", r.code, r.stderr)
	}
	d.run("", "exp", "abort", slow, "--yes")
}

type event struct {
	Seq                               int64
	Kind, ID, Status, Reason, Message string
}

func parseEvents(t *testing.T, out string) []event {
	t.Helper()
	var evs []event
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event line %q: %v", line, err)
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	return evs
}

// restartDev starts `falcon dev` again on d's data dir and addresses, as a
// restarted server would be found by the clients of the first.
func restartDev(t *testing.T, d *dev) *dev {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := &dev{t: t, dataDir: d.dataDir, http: d.http, grpc: d.grpc}
		n.launch(t, nil, nil)
		err := n.waitUp(time.Until(deadline))
		if err == nil {
			n.stopAtEnd(t, "restarted falcon dev")
			return n
		}
		select {
		case <-n.exited:
		default:
			n.kill(syscall.SIGKILL)
			t.Fatalf("falcon dev did not come back: %v\n%s", err, n.stderr)
		}
		// It could not listen yet (the port of the one killed): again.
		if time.Now().After(deadline) {
			t.Fatalf("falcon dev did not come back: %s", n.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// bgProc is a CLI command running in the background.
type bgProc struct {
	args     []string
	cmd      *exec.Cmd
	out, err syncbuf.Buffer
	done     chan struct{}
}

func (d *dev) background(args ...string) *bgProc {
	d.t.Helper()
	p := &bgProc{args: args, done: make(chan struct{})}
	p.cmd = exec.Command(falconBin, args...)
	p.cmd.Env = append(os.Environ(), "FALCON_SERVER=http://"+d.http)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	d.t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *bgProc) stdout() string { return p.out.String() }
func (p *bgProc) stderr() string { return p.err.String() }

// wait returns the command's exit code, failing the test if it is still
// running after limit.
func (p *bgProc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("falcon %v still running after %s\nstdout:\n%s\nstderr:\n%s", p.args, limit, p.stdout(), p.stderr())
	}
	return p.cmd.ProcessState.ExitCode()
}
