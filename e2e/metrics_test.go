package e2e

import (
	"os"
	"strings"
	"testing"
)

const metricsManifest = `
name: metrics-out
metrics:
  - {name: step_time, pattern: 'step=(?P<step>\d+) step_time: (?P<value>[0-9.]+)', better: lower}
  - {name: tflops, pattern: 'tflops=(?P<value>[0-9.]+)', better: higher}
role_to_task_spec:
  main:
    command: |
      # Rank 1 prints too, but only rank 0's log is read; only rank 0
      # writes the shared file.
      if [ "$FALCON_RANK" != 0 ]; then echo "step=1 step_time: 9.9"; echo "tflops=1"; exit 0; fi
      for s in 1 2 3 4; do
        echo "step=$s step_time: 0.$s"
        echo "{\"step\": $s, \"loss\": $((10 - s)), \"tflops\": 300}" >> "$FALCON_ARTIFACT_DIR/metrics.jsonl"
      done
      echo "tflops=310.5"
      echo "step=9 step_time: 1.2.3"
      echo 'not json' >> "$FALCON_ARTIFACT_DIR/metrics.jsonl"
      printf '{"step": 5, "loss": 4.5}' >> "$FALCON_ARTIFACT_DIR/metrics.jsonl"
    replica: 2
`

func TestMetricsFromFileAndLog(t *testing.T) {
	d := startDev(t, "")
	id := d.create(metricsManifest)["id"].(string)
	if r := d.run("", "exp", "wait", id, "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait: %d %s", r.code, r.stderr)
	}
	m := d.mustJSON("exp", "metrics", id, "--series", "loss")
	byName := map[string]map[string]any{}
	for _, x := range m["metrics"].([]any) {
		s := x.(map[string]any)
		byName[s["name"].(string)] = s
	}
	loss, st := byName["loss"], byName["step_time"]
	// loss: 9, 8, 7, 6 and the last line without a newline, 4.5.
	if loss == nil || loss["count"] != float64(5) || loss["first"] != float64(9) || loss["last"] != 4.5 || loss["min"] != 4.5 || loss["median"] != float64(7) || loss["source"] != "file" {
		t.Errorf("loss summary: %v", loss)
	}
	if st == nil || st["count"] != float64(4) || st["max"] != 0.4 || st["better"] != "lower" || st["source"] != "log" {
		t.Errorf("step_time summary: %v", st)
	}
	// tflops is in both: the file's four points win over the log's one.
	if tf := byName["tflops"]; tf == nil || tf["count"] != float64(4) || tf["source"] != "file" {
		t.Errorf("tflops summary: %v", tf)
	}
	if c, _ := m["conflicts"].([]any); len(c) != 1 || c[0] != "tflops" {
		t.Errorf("conflicts: %v", m["conflicts"])
	}
	// "not json" in the file and the unparsable step_time in the log.
	if m["skipped_lines"] != float64(2) {
		t.Errorf("skipped_lines = %v; want 2", m["skipped_lines"])
	}
	series := m["series"].([]any)[0].(map[string]any)["points"].([]any)
	if len(series) != 5 || series[4].(map[string]any)["value"] != 4.5 {
		t.Errorf("loss series: %v", series)
	}
	if r := d.run("", "exp", "metrics", id, "--series", "nope"); r.code != 2 || !strings.Contains(r.stderr, "series") {
		t.Errorf("unknown series: exit %d %q", r.code, r.stderr)
	}

	bad := strings.Replace(metricsManifest, "(?P<value>[0-9.]+)', better: higher", "([0-9.]+)', better: higher", 1)
	bad = strings.Replace(bad, "metrics-out", "metrics-bad", 1)
	f := t.TempDir() + "/bad.yaml"
	writeFile(t, f, bad)
	r := d.run("", "exp", "create", "-f", f)
	if r.code != 2 || !strings.Contains(r.stderr, "metrics[1].pattern") || !strings.Contains(r.stderr, "value") {
		t.Errorf("bad pattern at create: exit %d %q; want 2 naming metrics[1].pattern", r.code, r.stderr)
	}
	if l := d.mustJSON("exp", "list"); strings.Contains(l["items"].(any).([]any)[0].(map[string]any)["name"].(string), "metrics-bad") {
		t.Error("a refused experiment was stored")
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
