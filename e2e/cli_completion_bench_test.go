package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkCompletion measures what a shell waits for when Tab completes an
// experiment ID: one `falcon __complete exp get exp-` process against falcon
// dev holding 200 experiments (the completion offers the newest 200). It
// reports the median and p95 of the process's wall time beside ns/op.
func BenchmarkCompletion(b *testing.B) {
	d := startDev(b, "")
	const n = 200
	for i := range n {
		d.create(fmt.Sprintf("name: complete-%03d\nrole_to_task_spec:\n  main: {command: 'true', replica: 1}\n", i))
	}
	env := append(os.Environ(), "FALCON_SERVER=http://"+d.http)
	complete := func() (time.Duration, int) {
		cmd := exec.Command(falconBin, "__complete", "exp", "get", "exp-")
		cmd.Env = env
		start := time.Now()
		out, err := cmd.Output()
		el := time.Since(start)
		if err != nil {
			b.Fatalf("__complete: %v", err)
		}
		return el, strings.Count(string(out), "\n") - 1 // the last line is the directive
	}
	if _, got := complete(); got != n {
		b.Fatalf("completed %d experiments, want %d", got, n)
	}
	var times []time.Duration
	b.ResetTimer()
	for b.Loop() {
		el, _ := complete()
		times = append(times, el)
	}
	b.StopTimer()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
	b.ReportMetric(float64(times[len(times)*95/100].Microseconds())/1000, "p95-ms")
}
