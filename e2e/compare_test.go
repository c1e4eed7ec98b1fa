package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// compareManifest writes 60 steps of step_time around mean (±1%) to
// metrics.jsonl; its config carries lr.
const compareManifest = `name: %s
config: |
  optimizer:
    lr: %s
    name: adam
role_to_task_spec:
  main:
    replica: 1
    envs: {MEAN: "%s", SEED: "%d"}
    command: |
      awk -v s=$MEAN -v seed=$SEED 'BEGIN{srand(seed); for(i=1;i<=60;i++) printf "{\"step\": %%d, \"step_time\": %%.5f}\n", i, s*(1+0.01*(2*rand()-1))}' > $FALCON_ARTIFACT_DIR/metrics.jsonl
`

// TestDiffAndCompare on falcon dev: two runs that differ in their learning
// rate, the second 5% slower per step. diff shows the config key that
// differs (and only that); compare calls the slowdown a regression, and
// --fail-on-regression exits 9; bad arguments are refused by name.
func TestDiffAndCompare(t *testing.T) {
	d := startDev(t, "")
	var ids []string
	for i, c := range []struct{ lr, mean string }{{"0.001", "1.00"}, {"0.002", "1.05"}} {
		exp := d.create(fmt.Sprintf(compareManifest, fmt.Sprintf("cmp-%d", i), c.lr, c.mean, i+1))
		ids = append(ids, exp["id"].(string))
	}
	for _, id := range ids {
		d.waitFor(id, "Succeeded", func(e map[string]any) bool { return e["status"] == "Succeeded" })
	}

	diff := d.mustJSON("exp", "diff", ids[0], ids[1])
	got := map[string]string{}
	for _, r := range diff["rows"].([]any) {
		row := r.(map[string]any)
		got[row["key"].(string)] = fmt.Sprint(row["values"])
	}
	want := map[string]string{"config.optimizer.lr": "[0.001 0.002]", "role.main.envs.MEAN": "[1.00 1.05]", "role.main.envs.SEED": "[1 2]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("diff rows %v, want %v (and nothing else)", got, want)
	}
	md := d.run("", "exp", "diff", ids[0], ids[1], "--all", "-o", "md")
	if md.code != 0 || !strings.Contains(md.stdout, "| config.optimizer.lr | 0.001 | 0.002 |") || !strings.Contains(md.stdout, "| config.optimizer.name | adam | adam |") {
		t.Errorf("diff --all -o md: exit %d\n%s%s", md.code, md.stdout, md.stderr)
	}

	cmp := d.mustJSON("exp", "compare", ids[0], ids[1])
	var res struct {
		Regressed bool
		Metrics   []struct {
			Name, Better string
			Values       []struct {
				Verdict  string
				Relative float64
				Steps    int
			}
		}
	}
	b, _ := json.Marshal(cmp)
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Metrics) != 1 || res.Metrics[0].Name != "step_time" || res.Metrics[0].Better != "lower" {
		t.Fatalf("compare: %s", b)
	}
	v := res.Metrics[0].Values[1]
	if v.Verdict != "regression" || v.Relative < 0.03 || v.Relative > 0.07 || v.Steps != 54 || !res.Regressed {
		t.Errorf("step_time against the baseline: %+v (regressed %v); want a ~5%% regression over 54 steps", v, res.Regressed)
	}
	if r := d.run("", "exp", "compare", ids[0], ids[1], "--fail-on-regression", "-o", "table"); r.code != 9 || !strings.Contains(r.stderr, "regressed against "+ids[0]+": step_time in "+ids[1]) {
		t.Errorf("--fail-on-regression: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The other way round it is an improvement, and nothing fails.
	if r := d.run("", "exp", "compare", ids[1], ids[0], "--fail-on-regression", "-o", "table"); r.code != 0 || !strings.Contains(r.stdout, "improvement") {
		t.Errorf("reversed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, bad := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"exp", "compare", ids[0], ids[0]}, 2, "is given twice"},
		{[]string{"exp", "compare", ids[0], ids[1], "--threshold", "two"}, 2, "--threshold"},
		{[]string{"exp", "compare", ids[0], ids[1], "--metric", "mfu"}, 4, "--metric mfu: experiment " + ids[0] + " reports no such metric; it has: step_time"},
		{[]string{"exp", "diff", ids[0]}, 2, "at least two"},
	} {
		if r := d.run("", bad.args...); r.code != bad.code || !strings.Contains(r.stderr, bad.says) {
			t.Errorf("%v: exit %d %q; want %d saying %q", bad.args, r.code, r.stderr, bad.code, bad.says)
		}
	}
}

// BenchmarkExpCompare100k times `falcon exp compare` of two experiments
// with 10^5 steps each on falcon dev, against the baseline of reading one
// experiment's series (`falcon exp metrics --series step_time`) in the
// same run: what the comparison costs beyond fetching its data.
func BenchmarkExpCompare100k(b *testing.B) {
	d := startDev(b, "")
	var ids []string
	for i, mean := range []string{"1.00", "1.01"} {
		m := strings.Replace(fmt.Sprintf(compareManifest, fmt.Sprintf("big-%d", i), "0.001", mean, i+1), "i<=60", "i<=100000", 1)
		exp := d.create(m)
		ids = append(ids, exp["id"].(string))
	}
	for _, id := range ids {
		d.waitFor(id, "Succeeded", func(e map[string]any) bool { return e["status"] == "Succeeded" })
		if r := d.run("", "exp", "metrics", id, "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"count": 100000`) {
			b.Fatalf("metrics of %s: exit %d %s", id, r.code, r.stdout)
		}
	}
	b.Run("baseline=metrics-series", func(b *testing.B) {
		for b.Loop() {
			if r := d.run("", "exp", "metrics", ids[0], "--series", "step_time", "-o", "json"); r.code != 0 {
				b.Fatalf("exit %d %s", r.code, r.stderr)
			}
		}
	})
	b.Run("compare", func(b *testing.B) {
		for b.Loop() {
			if r := d.run("", "exp", "compare", ids[0], ids[1], "-o", "json"); r.code != 0 {
				b.Fatalf("exit %d %s", r.code, r.stderr)
			}
		}
	})
}
