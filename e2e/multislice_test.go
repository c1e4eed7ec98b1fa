package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// A multi-slice task under falcon dev: every host of every slice runs,
// told its rank over all slices and its slice as JAX multislice reads them;
// logs and exec address any rank of any slice, and a rank past the last
// slice is refused naming the slices.
func TestMultisliceOnDev(t *testing.T) {
	d := startDev(t, "")
	exp := d.create(`
name: multislice
role_to_task_spec:
  train:
    command: |
      echo "rank $FALCON_RANK of $FALCON_WORLD_SIZE slice $MEGASCALE_SLICE_ID of $MEGASCALE_NUM_SLICES via $MEGASCALE_COORDINATOR_ADDRESS"
      sleep 600
    replica: 2
    device_type: v5p
    device_topo: 2x2x2
    slices: 3
`)
	id := exp["id"].(string)
	d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
	for rank := range 6 {
		want := fmt.Sprintf("rank %d of 6 slice %d of 3 via 127.0.0.1:8081", rank, rank/2)
		var r result
		eventually(t, fmt.Sprintf("rank %d's log line", rank), func() bool {
			r = d.run("", "exp", "logs", id, "--rank", fmt.Sprint(rank))
			return strings.Contains(r.stdout, "rank ")
		})
		// Not a terminal: one JSON object per line.
		if strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, `"line":"`+want+`"`) {
			t.Errorf("rank %d's log: %q (exit %d, %s); want %q", rank, r.stdout, r.code, r.stderr, want)
		}
	}
	r := d.run("", "exp", "exec", id, "--rank", "5", "--", "sh", "-c", "echo $MEGASCALE_SLICE_ID $FALCON_RANK")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "2 5" {
		t.Errorf("exec --rank 5: exit %d, %q, %s; want \"2 5\"", r.code, r.stdout, r.stderr)
	}
	r = d.run("", "exp", "exec", id, "--rank", "6", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "ranks 0 to 5 (3 slices of replica 2)") {
		t.Errorf("exec --rank 6: exit %d, %s; want a refusal naming the 3 slices", r.code, r.stderr)
	}
	if r := d.run("", "exp", "abort", id, "--yes"); r.code != 0 {
		t.Fatalf("abort: %d %s", r.code, r.stderr)
	}
	d.waitFor(id, "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })

	bad := d.run(`
name: multislice-gpu
role_to_task_spec:
  train:
    command: "true"
    replica: 1
    device_type: nvidia-h100-80gb
    slices: 2
`, "exp", "create", "-f", "-")
	if bad.code != 2 || !strings.Contains(bad.stderr, "role_to_task_spec.train.slices") || !strings.Contains(bad.stderr, "TPU") {
		t.Errorf("GPU slices: exit %d, %s; want exit 2 naming role_to_task_spec.train.slices and TPU", bad.code, bad.stderr)
	}
}
