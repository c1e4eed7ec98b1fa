package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/logtime"
)

// falcon dev's ranks write their logs themselves, stamping nothing; the
// rank's supervisor notes when each log grew (package logtime), so
// `exp logs --timestamps` and `--since`, and `logs export --since`, work on
// falcon dev as on a cluster.
func TestDevLogsHaveTimes(t *testing.T) {
	d := startDev(t, "")
	gate := filepath.Join(t.TempDir(), "go")
	exp := d.create(fmt.Sprintf("name: dev-log-times\nrole_to_task_spec:\n  main:\n    command: 'echo early; while [ ! -e %s ]; do sleep 0.02; done; echo late'\n    replica: 1\n", gate))
	id := exp["id"].(string)
	type line struct {
		Line string    `json:"line"`
		Time time.Time `json:"time"`
	}
	lines := func(args ...string) []line {
		t.Helper()
		r := d.run("", append([]string{"exp", "logs", id, "-o", "json"}, args...)...)
		if r.code != 0 {
			t.Fatalf("exp logs %v: %d %s", args, r.code, r.stderr)
		}
		var out []line
		for _, s := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if s == "" {
				continue
			}
			var l line
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			out = append(out, l)
		}
		return out
	}
	started := time.Now()
	jobID := jobsOf(exp)[0]["id"].(string)
	// "early" is dated once the supervisor has noted it in the log's index.
	eventually(t, "early noted in the log's index", func() bool {
		idx, err := logtime.Open(filepath.Join(d.dataDir, "logs", jobID, jobID+"-0.log"))
		if err != nil {
			t.Fatal(err)
		}
		defer idx.Close()
		_, ok := idx.At(int64(len("early\n")))
		return ok
	})
	mid := time.Now()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d.waitFor(id, "Succeeded", func(e map[string]any) bool { return e["status"] == "Succeeded" })

	all := lines()
	if len(all) != 2 || all[0].Line != "early" || all[1].Line != "late" {
		t.Fatalf("lines %+v, want early then late", all)
	}
	if all[0].Time.Before(started.Add(-time.Second)) || all[0].Time.After(mid) || all[1].Time.Before(mid) || all[1].Time.After(time.Now()) {
		t.Fatalf("early at %v and late at %v; want early before %v and late after it", all[0].Time, all[1].Time, mid)
	}
	since := lines("--since", mid.UTC().Format(time.RFC3339Nano))
	if len(since) != 1 || since[0].Line != "late" {
		t.Fatalf("--since %v: %+v, want only late", mid, since)
	}
	if r := d.run("", "exp", "logs", id, "--timestamps"); r.code != 0 || !strings.Contains(r.stdout, all[1].Time.UTC().Format("2006-01-02T15:04:05")) {
		t.Fatalf("--timestamps: %d %q %s", r.code, r.stdout, r.stderr)
	}

	dir := t.TempDir()
	d.mustJSON("exp", "logs", "export", id, "--to", "file://"+dir+"/out", "--since", mid.UTC().Format(time.RFC3339Nano))
	b, err := os.ReadFile(filepath.Join(dir, "out", "main-rank-0.log"))
	if err != nil || string(b) != "late\n" {
		t.Fatalf("export --since: %q %v, want only late", b, err)
	}
}
