package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sleepManifest = `
name: %s
role_to_task_spec:
  main:
    command: sleep 300
    replica: 1
`

// explainJSON runs falcon exp explain -o json and decodes it.
func (d *dev) explainJSON(id string) map[string]any {
	d.t.Helper()
	return d.mustJSON("exp", "explain", id)
}

func firstJob(t *testing.T, x map[string]any) map[string]any {
	t.Helper()
	jobs, _ := x["jobs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("explanation has %d jobs, want 1: %v", len(jobs), x)
	}
	return jobs[0].(map[string]any)
}

// TestExplain: falcon exp explain on falcon dev says why a running job
// went to its cluster (the record of its pick) and why a waiting one waits
// (its cluster in maintenance: no cluster can take it now, each one's
// reason given), as a table and as JSON; an unknown experiment is NotFound
// naming it, and a clusters file with a selection that is no policy is
// refused naming the key and the allowed values, nothing applied.
func TestExplain(t *testing.T) {
	d := startDev(t, "")
	clusters := d.mustJSON("cluster", "list")
	items, _ := clusters["items"].([]any)
	if len(items) != 1 || clusters["selection"] != "spread" {
		t.Fatalf("falcon dev's registry: %v", clusters)
	}
	local := items[0].(map[string]any)["name"].(string)

	run := d.create(strings.ReplaceAll(sleepManifest, "%s", "explain-running"))
	runID := run["id"].(string)
	t.Cleanup(func() { d.run("", "exp", "abort", runID) })
	d.waitFor(runID, "Running", func(x map[string]any) bool { return x["status"] == "Running" })

	j := firstJob(t, d.explainJSON(runID))
	sel, _ := j["selection"].(map[string]any)
	if j["status"] != "Running" || j["cluster"] != local || sel["selected_cluster"] != local || sel["policy"] != "spread" ||
		!strings.HasPrefix(sel["reason"].(string), "selected "+local+": ") {
		t.Errorf("running job's explanation: %v", j)
	}
	if cands, _ := sel["candidates"].([]any); len(cands) != 1 || cands[0].(map[string]any)["rank"] != float64(1) {
		t.Errorf("running job's candidates: %v", sel["candidates"])
	}
	// By name too, as every command that takes an experiment.
	table := d.run("", "exp", "explain", "explain-running", "-o", "table")
	if table.code != 0 || !strings.Contains(table.stdout, "Placed: selected "+local+": ") ||
		!strings.Contains(table.stdout, "(policy spread, decided ") || !strings.Contains(table.stdout, " ago, at ") {
		t.Errorf("explain table (exit %d):\n%s%s", table.code, table.stdout, table.stderr)
	}

	// A job whose only cluster is in maintenance waits, and says why.
	if r := d.run("", "cluster", "set-status", local, "maintenance"); r.code != 0 {
		t.Fatalf("set-status: %s", r.stderr)
	}
	wait := d.create(strings.ReplaceAll(sleepManifest, "%s", "explain-waiting"))
	waitID := wait["id"].(string)
	t.Cleanup(func() { d.run("", "exp", "abort", waitID) })
	d.waitFor(waitID, "a waiting job", func(x map[string]any) bool {
		js := jobsOf(x)
		return len(js) == 1 && js[0]["reason"] == "Waiting" && strings.Contains(js[0]["message"].(string), "not active")
	})
	j = firstJob(t, d.explainJSON(waitID))
	now, _ := j["now"].(map[string]any)
	cands, _ := now["candidates"].([]any)
	if j["status"] != "Pending" || j["reason"] != "Waiting" || now["selected_cluster"] != "" || len(cands) != 1 ||
		cands[0].(map[string]any)["rejected"] != "not active" {
		t.Errorf("waiting job's explanation: %v", j)
	}
	if msg, _ := j["message"].(string); !strings.Contains(msg, local+": not active") || !strings.Contains(msg, "the job waits") {
		t.Errorf("waiting job's message %q does not say why it waits", msg)
	}
	if na, _ := j["no_available_cluster"].(string); !strings.Contains(na, local+": not active") {
		t.Errorf("no_available_cluster = %q", na)
	}
	table = d.run("", "exp", "explain", waitID, "-o", "table")
	if table.code != 0 || !strings.Contains(table.stdout, "not active") {
		t.Errorf("explain table of the waiting job (exit %d):\n%s%s", table.code, table.stdout, table.stderr)
	}

	// Bad input.
	if r := d.run("", "exp", "explain", "no-such-exp"); r.code != 3 || !strings.Contains(r.stderr, "no-such-exp") {
		t.Errorf("explain of an unknown experiment: exit %d (want 3), stderr %q", r.code, r.stderr)
	}
	file := filepath.Join(t.TempDir(), "clusters.yaml")
	if err := os.WriteFile(file, []byte("selection: fastest\nclusters:\n  edge-x:\n    provider: kubernetes\n    kubeconfig: /nonexistent\n    context: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := d.run("", "cluster", "apply", "-f", file)
	if r.code != 2 || !strings.Contains(r.stderr, `selection: "fastest": allowed values are spread (the default) and priority (line 1)`) {
		t.Errorf("apply of a bad selection: exit %d (want 2), stderr %q", r.code, r.stderr)
	}
	after := d.mustJSON("cluster", "list")
	if b1, _ := json.Marshal(after["items"]); after["selection"] != "spread" || strings.Contains(string(b1), "edge-x") {
		t.Errorf("a refused file changed the registry: %v", after)
	}
}
