package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconhq/falcon/internal/npy"
	"github.com/falconhq/falcon/internal/xplane/xplanetest"
)

// writeNpy writes a .npy file under an experiment's (file://) artifacts,
// as a job would have.
func writeNpy(t *testing.T, exp map[string]any, rel, dtype string, shape []int, vals []float64) {
	t.Helper()
	p := filepath.Join(strings.TrimPrefix(exp["artifact_path"].(string), "file://"), rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := npy.Write(f, dtype, shape, vals); err != nil {
		t.Fatal(err)
	}
}

// TestAnalyzeAccuracy on falcon dev: two runs' dumps (float32 against
// bfloat16) are compared by the analysis controller next to the data;
// the CLI waits and prints the report; report ls and cat read it back;
// an analysis with nothing to compare fails saying where it looked.
func TestAnalyzeAccuracy(t *testing.T) {
	d := startDev(t, "")
	var exps []map[string]any
	for _, name := range []string{"jax-run", "torch-run"} {
		e := d.create("name: " + name + "\nrole_to_task_spec:\n  main: {command: 'true', replica: 1}\n")
		exps = append(exps, d.waitFor(e["id"].(string), "Succeeded", func(x map[string]any) bool { return x["status"] == "Succeeded" }))
	}
	a, b := exps[0]["id"].(string), exps[1]["id"].(string)

	// Nothing to compare yet: the analysis fails and says where it looked.
	if r := d.run("", "analyze", "accuracy", a, b, "-o", "json"); r.code != 7 || !strings.Contains(r.stderr, "no .npy files matching") {
		t.Fatalf("no dumps: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	writeNpy(t, exps[0], "dumps/logits.npy", "float32", []int{2, 2}, []float64{1.01, 2, 3, 4})
	writeNpy(t, exps[1], "dumps/logits.npy", "bfloat16", []int{2, 2}, []float64{1.01, 2, 3, 4})
	writeNpy(t, exps[0], "dumps/only_jax.npy", "float32", []int{1}, []float64{1})

	r := d.run("", "analyze", "accuracy", a, b, "--path", "dumps/*", "--rtol", "1e-2", "-o", "table")
	if r.code != 0 || !strings.Contains(r.stdout, "| dumps/logits.npy | [2 2] | float32/bfloat16 |") || !strings.Contains(r.stdout, "only in "+a+": dumps/only_jax.npy") {
		t.Fatalf("analyze accuracy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ana := d.mustJSON("analyze", "accuracy", a, b, "--path", "dumps/*")
	var summary map[string]float64
	if err := json.Unmarshal([]byte(ana["summary"].(string)), &summary); err != nil || summary["tensors"] != 1 || summary["not_close"] != 1 || summary["only_in_a"] != 1 {
		t.Fatalf("summary %v (%v)", ana["summary"], err)
	}
	id := ana["id"].(string)

	ls := d.mustJSON("report", "ls", a)
	if items := ls["items"].([]any); len(items) != 3 || items[0].(map[string]any)["id"] != id {
		t.Fatalf("report ls: %v; want three analyses, newest first", ls)
	}
	cat := d.run("", "report", "cat", a, id, "--format", "json")
	var rep struct {
		Tensors []struct {
			Path          string
			AllClose      bool  `json:"allclose"`
			FirstMismatch []int `json:"first_mismatch"`
		}
	}
	if cat.code != 0 || json.Unmarshal([]byte(cat.stdout), &rep) != nil || len(rep.Tensors) != 1 || rep.Tensors[0].AllClose || len(rep.Tensors[0].FirstMismatch) != 2 {
		t.Fatalf("report cat --format json: exit %d %s %s", cat.code, cat.stdout, cat.stderr)
	}
	for _, bad := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"analyze", "accuracy", a, a}, 2, "given twice"},
		{[]string{"analyze", "accuracy", a, b, "--path", "["}, 2, "params.path"},
		{[]string{"analyze", "accuracy", a, "exp-nosuchexp0"}, 3, "exp-nosuchexp0"},
		{[]string{"report", "cat", b, "ana-nosuchrep0"}, 3, "ana-nosuchrep0"},
		{[]string{"report", "cat", a, id, "--format", "pdf"}, 2, "--format"},
	} {
		if r := d.run("", bad.args...); r.code != bad.code || !strings.Contains(r.stderr, bad.says) {
			t.Errorf("%v: exit %d %q; want %d saying %q", bad.args, r.code, r.stderr, bad.code, bad.says)
		}
	}
}

// TestAnalyzeProfile on falcon dev: two runs' XProf profiles (the second
// with a longer idle lead per step) analysed by the analysis controller
// next to the data, one alone and then A against B, through the CLI.
func TestAnalyzeProfile(t *testing.T) {
	d := startDev(t, "")
	var exps []map[string]any
	for _, name := range []string{"prof-a", "prof-b"} {
		e := d.create("name: " + name + "\nrole_to_task_spec:\n  main: {command: 'true', replica: 1, device_type: v5p, device_topo: 2x2x1}\n")
		exps = append(exps, d.waitFor(e["id"].(string), "ended", func(x map[string]any) bool {
			return x["status"] == "Succeeded" || x["status"] == "Failed"
		}))
	}
	var steps []int64
	for i, e := range exps {
		dir := filepath.Join(strings.TrimPrefix(e["artifact_path"].(string), "file://"), "plugins", "profile", "2026_12_01_12_00_00")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		s := xplanetest.TPUSteps()
		s.Steps, s.Repeat, s.Variants = 5, 4, 2
		s.LeadPs += int64(i) * 500_000
		tot, err := xplanetest.WriteSynthetic(filepath.Join(dir, "host0.xplane.pb"), s)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, tot.StepPs)
	}
	a, b := exps[0]["id"].(string), exps[1]["id"].(string)
	one := d.mustJSON("analyze", "profile", a)
	var sum struct {
		Steps struct {
			Count    int
			MedianPs float64 `json:"median_ps"`
		}
		FlopsUtilization *float64 `json:"flops_utilization"`
	}
	if err := json.Unmarshal([]byte(one["summary"].(string)), &sum); err != nil || sum.Steps.Count != 5 || sum.Steps.MedianPs != float64(steps[0]) || sum.FlopsUtilization == nil {
		t.Fatalf("analyze profile: %v (%v)", one["summary"], err)
	}
	md := d.run("", "analyze", "compare", a, b, "-o", "table")
	if md.code != 0 || !strings.Contains(md.stdout, "# Profile A/B") {
		t.Fatalf("analyze compare: exit %d\n%s%s", md.code, md.stdout, md.stderr)
	}
	if r := d.run("", "analyze", "profile", a, "--session", "nope"); r.code != 7 || !strings.Contains(r.stderr, `no profile session "nope"`) {
		t.Errorf("unknown session: exit %d %s", r.code, r.stderr)
	}
}
