package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestInteractiveTTL on falcon dev, with real processes: an interactive
// experiment needs no command and holds its ranks; `exp get` shows the
// time left; `exp extend` sets it; at expiry the ranks are stopped and the
// experiment ends Aborted saying its ttl expired; extending it then is
// refused (exit 4).
func TestInteractiveTTL(t *testing.T) {
	d := startDev(t, "")
	exp := d.create("name: hold\ninteractive: true\nttl: 1h\nrole_to_task_spec:\n  main:\n    replica: 2\n")
	id := exp["id"].(string)
	d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
	if r := d.run("", "exp", "get", id, "-o", "table"); r.code != 0 || !strings.Contains(r.stdout, "left (until") || !strings.Contains(r.stdout, "interactive") {
		t.Fatalf("exp get: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The ranks hold: a second later the experiment still runs.
	time.Sleep(time.Second)
	if e := d.mustJSON("exp", "get", id); e["status"] != "Running" {
		t.Fatalf("interactive experiment %v, want still Running", e["status"])
	}
	if r := d.run("", "exp", "extend", id, "--ttl", "0s"); r.code != 2 || !strings.Contains(r.stderr, "--ttl: must be a positive duration") {
		t.Fatalf("extend --ttl 0s: exit %d %s", r.code, r.stderr)
	}
	ext := d.mustJSON("exp", "extend", id, "--ttl", "3s")
	at, err := time.Parse(time.RFC3339Nano, ext["expires_at"].(string))
	if err != nil || time.Until(at) > 4*time.Second {
		t.Fatalf("extend --ttl 3s: expires_at %v (%v)", ext["expires_at"], err)
	}
	end := d.waitFor(id, "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })
	if msg, _ := end["message"].(string); !strings.HasPrefix(msg, "ttl expired at ") {
		t.Errorf("message %q, want the ttl's expiry", msg)
	}
	for _, j := range jobsOf(end) {
		if j["status"] != "Aborted" {
			t.Errorf("job %v is %v, want Aborted", j["id"], j["status"])
		}
	}
	if r := d.run("", "exp", "extend", id, "--ttl", "1h"); r.code != 4 || !strings.Contains(r.stderr, "is Aborted") {
		t.Fatalf("extend after the end: exit %d %s", r.code, r.stderr)
	}
	// Its processes are gone.
	for _, j := range jobsOf(end) {
		for _, pid := range d.pids(j["id"].(string)) {
			if groupAlive(pid) {
				t.Errorf("rank process group %d of job %v still runs", pid, j["id"])
			}
		}
	}
}
