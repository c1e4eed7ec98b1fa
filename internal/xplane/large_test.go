package xplane_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/xplane"
	"github.com/falconhq/falcon/internal/xplane/xplanetest"
)

// counter counts what a walk hands it and asks for every line.
type counter struct{ planes, lines, events int64 }

func (c *counter) Plane(p *xplane.Plane) []int {
	c.planes++
	idx := make([]int, len(p.Lines))
	for i := range idx {
		idx[i] = i
	}
	return idx
}
func (c *counter) Line(*xplane.Plane, *xplane.LineHeader) { c.lines++ }
func (c *counter) Event(*xplane.Event)                    { c.events++ }
func (c *counter) EndLine()                               {}

// syntheticSpec is xplanetest.TPUSteps of 10 steps on 2 devices.
func syntheticSpec() xplanetest.Synthetic {
	s := xplanetest.TPUSteps()
	s.Devices, s.Steps = 2, 10
	return s
}

// profileMiB is the size of the large generated profile: 64 MiB in
// `go test`, more with FALCON_PROFILE_MIB.
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

// TestLargeWalkBoundedMemory walks a profile of 64 MiB written streaming,
// and checks every event is seen while the heap grows by far less than
// the file.
func TestLargeWalkBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 64 MiB profile")
	}
	dir := t.TempDir()
	s := syntheticSpec()
	mib := profileMiB(t, 64)
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
	f, err := xplane.Open(path, xplane.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	var c counter
	h := xplanetest.StartHeapSampler(time.Millisecond)
	start := time.Now()
	sum, err := f.Walk(context.Background(), xplane.WalkOptions{}, &c)
	elapsed := time.Since(start)
	base, peak := h.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if sum.Events != tot.Events || c.events != tot.Events || sum.Bytes != tot.Bytes {
		t.Errorf("walk saw %d events (%d visited) of %d bytes; the file has %d events, %d bytes",
			sum.Events, c.events, sum.Bytes, tot.Events, tot.Bytes)
	}
	// Line headers are read before the events, which are read again.
	if sum.BytesRead < tot.Bytes || sum.BytesRead > 3*tot.Bytes {
		t.Errorf("read %d bytes of a %d-byte file", sum.BytesRead, tot.Bytes)
	}
	growth := int64(peak) - int64(base)
	t.Logf("%d MiB, %d events: %.0f MB/s, %.2f M events/s; heap high-water %.1f MiB above the %.1f MiB at the start",
		tot.Bytes>>20, tot.Events, float64(tot.Bytes)/1e6/elapsed.Seconds(), float64(tot.Events)/1e6/elapsed.Seconds(),
		float64(growth)/(1<<20), float64(base)/(1<<20))
	if limit := int64(16 << 20); growth > limit {
		t.Errorf("the heap grew by %d bytes walking %d bytes; want at most %d", growth, tot.Bytes, limit)
	}
}

// BenchmarkWalk decodes every byte of a generated profile (64 MiB, or
// FALCON_PROFILE_MIB) without analysing it.
func BenchmarkWalk(b *testing.B) {
	dir := b.TempDir()
	s := syntheticSpec()
	steps, err := s.StepsFor(dir, profileMiB(b, 64))
	if err != nil {
		b.Fatal(err)
	}
	s.Steps = steps
	path := filepath.Join(dir, "large.xplane.pb")
	tot, err := xplanetest.WriteSynthetic(path, s)
	if err != nil {
		b.Fatal(err)
	}
	f, err := xplane.Open(path, xplane.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetBytes(tot.Bytes)
	b.ResetTimer()
	for b.Loop() {
		if _, err := f.Walk(context.Background(), xplane.WalkOptions{}, &counter{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(tot.Events)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}
