package profile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/profile"
	"github.com/falconhq/falcon/internal/xplane/xplanetest"
)

// profileMiB is the size of the large generated profile: def MiB, or
// FALCON_PROFILE_MIB.
func profileMiB(t testing.TB, def int) int {
	if v := os.Getenv("FALCON_PROFILE_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("FALCON_PROFILE_MIB=%q: want a positive number of MiB", v)
		}
		return n
	}
	return def
}

// writeLarge writes a synthetic profile of about mib MiB on 4 devices.
func writeLarge(t testing.TB, mib int) (string, *xplanetest.Totals) {
	t.Helper()
	dir := t.TempDir()
	s := xplanetest.TPUSteps()
	s.Devices = 4
	steps, err := s.StepsFor(dir, mib)
	if err != nil {
		t.Fatal(err)
	}
	s.Steps = steps
	path := filepath.Join(dir, "large.xplane.pb")
	tot, err := xplanetest.WriteSynthetic(path, s)
	if err != nil {
		t.Fatal(err)
	}
	return path, tot
}

// TestLargeProfile analyses a 64 MiB profile (FALCON_PROFILE_MIB for
// another size) written streaming, checks every figure against what the
// generator put in it, and that the heap grows by far less than the file.
func TestLargeProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 64 MiB profile")
	}
	path, tot := writeLarge(t, profileMiB(t, 64))
	h := xplanetest.StartHeapSampler(time.Millisecond)
	start := time.Now()
	r, err := profile.AnalyzeFile(context.Background(), path, profile.Options{})
	elapsed := time.Since(start)
	base, peak := h.Stop()
	if err != nil {
		t.Fatal(err)
	}
	const devices = 4
	s := r.Summary
	if r.Bytes != tot.Bytes || r.Events != tot.Events || len(r.Devices) != devices || len(r.Warnings) != 0 {
		t.Errorf("%d bytes, %d events, %d devices, warnings %q; want %d, %d, %d, none", r.Bytes, r.Events, len(r.Devices), r.Warnings, tot.Bytes, tot.Events, devices)
	}
	wantSteps := profile.StepStats{Count: tot.Steps, TotalPs: int64(tot.Steps) * tot.StepPs, MeanPs: float64(tot.StepPs),
		MedianPs: float64(tot.StepPs), P90Ps: float64(tot.StepPs), MinPs: tot.StepPs, MaxPs: tot.StepPs}
	if s.Steps != wantSteps || s.DeviceSteps != devices*int64(tot.Steps) || s.WindowPs != devices*wantSteps.TotalPs {
		t.Errorf("steps %+v (%d device-steps, window %d); want %+v", s.Steps, s.DeviceSteps, s.WindowPs, wantSteps)
	}
	if s.BusyPs != devices*tot.BusyPs || s.SelfTimePs != devices*tot.BusyPs || s.Flops != devices*tot.Flops ||
		s.ModelFlops != devices*tot.ModelFlops || s.BytesAccessed != devices*tot.BytesAcc {
		t.Errorf("busy %d, self %d, flops %d, model flops %d, bytes %d; want %d, %d, %d, %d, %d", s.BusyPs, s.SelfTimePs, s.Flops, s.ModelFlops, s.BytesAccessed,
			devices*tot.BusyPs, devices*tot.BusyPs, devices*tot.Flops, devices*tot.ModelFlops, devices*tot.BytesAcc)
	}
	if s.OpCount != len(tot.Ops) || len(s.Ops) != len(tot.Ops) {
		t.Fatalf("%d ops (%d listed), want %d", s.OpCount, len(s.Ops), len(tot.Ops))
	}
	for _, op := range s.Ops {
		w := tot.Ops[op.Name]
		if w == nil || op.Category != w.Category || op.Occurrences != devices*w.Occurrences || op.TimePs != devices*w.TimePs ||
			op.SelfTimePs != devices*w.SelfTimePs || op.Flops != devices*w.Flops || op.ModelFlops != devices*w.ModelFlops || op.BytesAccessed != devices*w.BytesAccessed {
			t.Errorf("op %+v; want %d devices × %+v", op, devices, w)
		}
	}
	if want := float64(tot.Flops) / (float64(tot.Steps*int(tot.StepPs)) / 1e12 * 459e12); s.FlopsUtilization == nil || !near(*s.FlopsUtilization, want) {
		t.Errorf("FLOPS utilization %v, want %g", s.FlopsUtilization, want)
	}
	growth := int64(peak) - int64(base)
	t.Logf("%.1f MiB, %d events: %.0f MB/s, %.2f M events/s; heap high-water %.1f MiB above the %.1f MiB at the start",
		float64(tot.Bytes)/(1<<20), tot.Events, float64(tot.Bytes)/1e6/elapsed.Seconds(), float64(tot.Events)/1e6/elapsed.Seconds(),
		float64(growth)/(1<<20), float64(base)/(1<<20))
	if limit := int64(24 << 20); growth > limit {
		t.Errorf("the heap grew by %d bytes analysing %d bytes; want at most %d", growth, tot.Bytes, limit)
	}
}

func near(a, b float64) bool { return a == b || (a-b)/b < 1e-12 && (b-a)/b < 1e-12 }

// BenchmarkAnalyze parses and analyses a generated profile of 64 MiB
// (FALCON_PROFILE_MIB=1024 for the 1 GiB of docs/benchmarks.md) on 4
// devices: MB/s and events/s in this process, the Go heap's high-water
// mark above its start (runtime/metrics, sampled every millisecond), and
// then once more in a fresh process of this test binary, whose peak RSS
// (getrusage's ru_maxrss) is everything the analysis took.
func BenchmarkAnalyze(b *testing.B) {
	path, tot := writeLarge(b, profileMiB(b, 64))
	h := xplanetest.StartHeapSampler(time.Millisecond)
	b.SetBytes(tot.Bytes)
	b.ResetTimer()
	for b.Loop() {
		if _, err := profile.AnalyzeFile(context.Background(), path, profile.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	base, peak := h.Stop()
	b.ReportMetric(float64(tot.Events)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
	b.ReportMetric(float64(int64(peak)-int64(base))/(1<<20), "heap-MiB")

	cmd := exec.Command(os.Args[0], "-test.run=^TestAnalyzeHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FALCON_PROFILE_ANALYZE="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("helper process: %v\n%s", err, out)
	}
	var res struct{ Seconds float64 }
	if err := json.Unmarshal(lastLine(out), &res); err != nil {
		b.Fatalf("helper process said %q: %v", out, err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	b.ReportMetric(float64(tot.Bytes)/1e6/res.Seconds, "proc-MB/s")
	b.ReportMetric(float64(ru.Maxrss)/1024, "proc-peak-RSS-MiB") // KiB on Linux
	b.Logf("%.1f MiB, %d events (%.0f bytes/event); fresh process: %.2f s, peak RSS %.1f MiB",
		float64(tot.Bytes)/(1<<20), tot.Events, float64(tot.Bytes)/float64(tot.Events), res.Seconds, float64(ru.Maxrss)/1024)
}

// TestAnalyzeHelperProcess is BenchmarkAnalyze's fresh process: it
// analyses FALCON_PROFILE_ANALYZE once and prints how long that took.
func TestAnalyzeHelperProcess(t *testing.T) {
	path := os.Getenv("FALCON_PROFILE_ANALYZE")
	if path == "" {
		t.Skip("run by BenchmarkAnalyze")
	}
	start := time.Now()
	if _, err := profile.AnalyzeFile(context.Background(), path, profile.Options{}); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\n{\"Seconds\": %g}\n", time.Since(start).Seconds())
}

func lastLine(b []byte) []byte {
	lines := [][]byte{}
	start := 0
	for i, c := range b {
		if c == '\n' {
			if i > start {
				lines = append(lines, b[start:i])
			}
			start = i + 1
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if len(lines[i]) > 0 && lines[i][0] == '{' {
			return lines[i]
		}
	}
	return nil
}
