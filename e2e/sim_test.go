package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimFromDB on falcon dev, whose local user is its admin: three TPU
// experiments run, then falcon sim replays the jobs table's history
// through the API server (ListJobHistory) and writes the timeline as
// Parquet; the flags that do not go together are refused, naming them.
func TestSimFromDB(t *testing.T) {
	d := startDev(t, "")
	for i, topo := range []string{"2x2x1", "2x2x1", "2x2x2"} {
		hosts := map[string]int{"2x2x1": 1, "2x2x2": 2}[topo]
		e := d.create(fmt.Sprintf("name: sim-hist-%d\nrole_to_task_spec:\n  main: {command: 'true', replica: %d, device_type: v5p, device_topo: %s}\n", i, hosts, topo))
		d.waitFor(e["id"].(string), "Succeeded", func(x map[string]any) bool {
			if x["status"] == "Failed" || x["status"] == "Aborted" {
				t.Fatalf("experiment %v: %v %v", x["id"], x["status"], x["message"])
			}
			return x["status"] == "Succeeded"
		})
	}
	out := t.TempDir()
	r := d.run("", "sim", "--from-db", "--since", "1h", "--policy", "spec", "--policy", "per-job", "--out", out, "--out-format", "parquet", "-o", "json")
	if r.code != 0 {
		t.Fatalf("falcon sim --from-db: exit %d\n%s", r.code, r.stderr)
	}
	var got struct {
		Trace    string `json:"trace"`
		Policies []struct {
			Policy       string `json:"policy"`
			Jobs         int    `json:"jobs"`
			PoolsCreated int    `json:"pools_created"`
			Clusters     []struct {
				Cluster string `json:"cluster"`
			} `json:"clusters"`
		} `json:"policies"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if len(got.Policies) != 2 || got.Trace != "jobs table since 1h" {
		t.Fatalf("output %s", r.stdout)
	}
	if p := got.Policies[1]; p.Jobs != 3 || p.PoolsCreated != 3 || len(p.Clusters) != 1 || p.Clusters[0].Cluster != "local" {
		t.Errorf("per-job: %+v; want the 3 jobs, a pool each, on a simulated cluster named as the one they ran on", p)
	}
	for _, name := range []string{"spec.parquet", "per-job.parquet"} {
		if st, err := os.Stat(filepath.Join(out, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}

	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"sim", "--from-db", "--trace", "x.jsonl"}, "--trace: conflicts with --from-db"},
		{[]string{"sim", "--from-db", "--since", "last week"}, `--since: "last week" is neither a duration`},
		{[]string{"sim", "--from-db", "--since", "2099-01-01T00:00:00Z"}, "no job since 2099-01-01T00:00:00Z can be replayed (0 found)"},
	} {
		if r := d.run("", bad.args...); r.code == 0 || !strings.Contains(r.stderr, bad.says) {
			t.Errorf("%v: exit %d %q; want a failure saying %q", bad.args, r.code, r.stderr, bad.says)
		}
	}
}
