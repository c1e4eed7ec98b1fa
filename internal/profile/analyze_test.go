package profile_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	xplanev1 "github.com/falconhq/falcon/api/xplane/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/profile"
	"github.com/falconhq/falcon/internal/xplane"
	"github.com/falconhq/falcon/internal/xplane/xplanetest"
)

// t0 is the profile's start, in ns since the epoch.
const t0 = 1_700_000_000_000_000_000

var (
	while1  = xplanetest.Op{Name: "while.1", Category: "control flow"}
	fusion2 = xplanetest.Op{Name: "fusion.2", Category: "convolution fusion", Flops: 2_000_000, Bytes: 100_000}
	fusion3 = xplanetest.Op{Name: "fusion.3", Category: "convolution fusion", Flops: 1_000_000, ModelFlops: 800_000, Bytes: 50_000}
	copy4   = xplanetest.Op{Name: "copy.4", Category: "data formatting", Bytes: 400_000}
	out5    = xplanetest.Op{Name: "outside.5", Category: "data formatting", Bytes: 1}
	allred6 = xplanetest.Op{Name: "all-reduce.6", Category: "all-reduce", Bytes: 1_000}
	new7    = xplanetest.Op{Name: "new.7", Category: "convolution"}
)

// device0 has four steps of known times and, on its XLA Ops line, ops
// nested three deep, an op across a step boundary, ops outside every
// step and an event whose own flops stat overrides its metadata's. All
// times are picoseconds from t0.
//
//	steps: [100k,1.1M) [1.1M,2.3M) [2.3M,3.2M) [3.2M,4.6M)
//	step 1: while.1 200k+500k ⊃ {fusion.2 200k+200k ⊃ copy.4 250k+50k, fusion.3 450k+150k}; copy.4 800k+100k
//	step 2: fusion.2 1.2M+400k; fusion.3 1.6M+300k; copy.4 2.2M+200k (into step 3)
//	step 3: fusion.2 2.5M+100k with flops 5M
//	step 4: while.1 3.3M+1M ⊃ {fusion.3 3.3M+400k, fusion.3 3.7M+400k}
//	outside: outside.5 at 0+50k and 4.7M+100k
func device0() *xplanev1.XPlane {
	b := xplanetest.NewPlane(1, "/device:TPU:0")
	b.Peak(100, 1000) // 1e14 FLOP/s, 1e12 B/s
	// The Steps line starts 50 ns later than the ops line.
	steps := b.Line(1, "Steps", t0+50)
	for i, s := range [][2]int64{{50_000, 1_000_000}, {1_050_000, 1_200_000}, {2_250_000, 900_000}, {3_150_000, 1_400_000}} {
		xplanetest.Event(steps, b.EventID(string(rune('1'+i))), s[0], s[1])
	}
	b.Line(2, "XLA Modules", t0) // no events: ignored
	ops := b.Line(3, "XLA Ops", t0)
	ev := func(op xplanetest.Op, off, dur int64, stats ...*xplanev1.XStat) {
		xplanetest.Event(ops, b.OpID(op), off, dur, stats...)
	}
	ev(out5, 0, 50_000)
	ev(while1, 200_000, 500_000)
	ev(fusion2, 200_000, 200_000)
	ev(copy4, 250_000, 50_000)
	ev(fusion3, 450_000, 150_000)
	ev(copy4, 800_000, 100_000)
	ev(fusion2, 1_200_000, 400_000)
	ev(fusion3, 1_600_000, 300_000)
	ev(copy4, 2_200_000, 200_000)
	ev(fusion2, 2_500_000, 100_000, &xplanev1.XStat{MetadataId: b.StatID(xplanetest.StatFlops), Value: &xplanev1.XStat_Int64Value{Int64Value: 5_000_000}})
	ev(while1, 3_300_000, 1_000_000)
	ev(fusion3, 3_300_000, 400_000)
	ev(fusion3, 3_700_000, 400_000)
	ev(out5, 4_700_000, 100_000)
	return b.Plane
}

// device1 has no peak stats, four steps with the names of device0's, one
// fusion.2 at the start of each, and an aggregated all-reduce.6 (10
// occurrences, self time from its self_duration_ps stat).
func device1() *xplanev1.XPlane {
	b := xplanetest.NewPlane(2, "/device:TPU:1")
	steps := b.Line(1, "Steps", t0)
	ops := b.Line(3, "XLA Ops", t0)
	off := int64(0)
	for i, d := range []int64{1_100_000, 1_000_000, 900_000, 1_500_000} {
		xplanetest.Event(steps, b.EventID(string(rune('1'+i))), off, d)
		xplanetest.Event(ops, b.OpID(fusion2), off, 500_000)
		off += d
	}
	ops.Events = append(ops.Events, &xplanev1.XEvent{MetadataId: b.OpID(allred6),
		Data: &xplanev1.XEvent_NumOccurrences{NumOccurrences: 10}, DurationPs: 300_000,
		Stats: []*xplanev1.XStat{{MetadataId: b.StatID(xplanetest.StatSelfDurationPs), Value: &xplanev1.XStat_Int64Value{Int64Value: 250_000}}}})
	return b.Plane
}

// runB is a second run: one device, two steps of 1 µs, each with
// fusion.2 (600 ns), copy.4 (100 ns) and new.7 (50 ns), back to back.
func runB() *xplanev1.XPlane {
	b := xplanetest.NewPlane(1, "/device:TPU:0")
	b.Peak(100, 1000)
	steps := b.Line(1, "Steps", t0)
	ops := b.Line(2, "XLA Ops", t0)
	for k := int64(0); k < 2; k++ {
		at := k * 1_000_000
		xplanetest.Event(steps, b.EventID(string(rune('1'+k))), at, 1_000_000)
		xplanetest.Event(ops, b.OpID(fusion2), at, 600_000)
		xplanetest.Event(ops, b.OpID(copy4), at+600_000, 100_000)
		xplanetest.Event(ops, b.OpID(new7), at+700_000, 50_000)
	}
	return b.Plane
}

func hostPlane() *xplanev1.XPlane {
	b := xplanetest.NewPlane(100, "/host:CPU")
	l := b.Line(1, "python3", t0)
	xplanetest.Event(l, b.EventID("train_step"), 0, 5_000_000)
	return b.Plane
}

func write(t testing.TB, planes ...*xplanev1.XPlane) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "host-0.xplane.pb")
	if err := xplanetest.WriteFile(path, &xplanev1.XSpace{Planes: planes, Hostnames: []string{"host-0"}}); err != nil {
		t.Fatal(err)
	}
	return path
}

func analyze(t testing.TB, path string, opts profile.Options) *profile.Report {
	t.Helper()
	r, err := profile.AnalyzeFile(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var approx = cmpopts.EquateApprox(0, 1e-12)

func f(v float64) *float64 { return &v }

// Device 0's ops (see device0): self time is time less the direct
// children's, and only ops starting within a step count.
var (
	opFusion3  = profile.Op{Name: "fusion.3", Category: "convolution fusion", Occurrences: 4, TimePs: 1_250_000, SelfTimePs: 1_250_000, SelfFraction: 1.25 / 2.6, Flops: 4_000_000, ModelFlops: 3_200_000, BytesAccessed: 200_000}
	opFusion2  = profile.Op{Name: "fusion.2", Category: "convolution fusion", Occurrences: 3, TimePs: 700_000, SelfTimePs: 650_000, SelfFraction: 0.65 / 2.6, Flops: 9_000_000, ModelFlops: 9_000_000, BytesAccessed: 300_000}
	opCopy4    = profile.Op{Name: "copy.4", Category: "data formatting", Occurrences: 3, TimePs: 350_000, SelfTimePs: 350_000, SelfFraction: 0.35 / 2.6, BytesAccessed: 1_200_000}
	opWhile1   = profile.Op{Name: "while.1", Category: "control flow", Occurrences: 2, TimePs: 1_500_000, SelfTimePs: 350_000, SelfFraction: 0.35 / 2.6}
	wantDevice = profile.Device{Plane: "/device:TPU:0", Kind: "tpu", Figures: profile.Figures{
		Window: profile.WindowSteps,
		Steps: profile.StepStats{Count: 4, TotalPs: 4_500_000, MeanPs: 1_125_000, MedianPs: 1_100_000,
			P90Ps: 1_340_000, MinPs: 900_000, MaxPs: 1_400_000},
		DeviceSteps: 4, WindowPs: 4_500_000,
		BusyPs: 2_600_000, IdlePs: 1_900_000, IdleFraction: 1.9 / 4.5, SelfTimePs: 2_600_000,
		Flops: 13_000_000, ModelFlops: 12_200_000, BytesAccessed: 1_700_000,
		Peak:                    profile.Peak{FLOPS: 1e14, FLOPSSource: "profile", HBMBytesPerSecond: 1e12, HBMSource: "profile"},
		FlopsUtilization:        f(13e6 / (4.5e-6 * 1e14)),
		ModelFlopsUtilization:   f(12.2e6 / (4.5e-6 * 1e14)),
		HBMBandwidthUtilization: f(1.7e6 / (4.5e-6 * 1e12)),
		OutsideWindow:           profile.OutsideWindow{Events: 2, TimePs: 150_000},
		Categories: []profile.Category{
			{Name: "convolution fusion", Ops: 2, Occurrences: 7, TimePs: 1_950_000, SelfTimePs: 1_900_000, SelfFraction: 1.9 / 2.6, Flops: 13_000_000, BytesAccessed: 500_000},
			{Name: "control flow", Ops: 1, Occurrences: 2, TimePs: 1_500_000, SelfTimePs: 350_000, SelfFraction: 0.35 / 2.6},
			{Name: "data formatting", Ops: 1, Occurrences: 3, TimePs: 350_000, SelfTimePs: 350_000, SelfFraction: 0.35 / 2.6, BytesAccessed: 1_200_000},
		},
		OpCount: 4,
		Ops:     []profile.Op{opFusion3, opFusion2, opCopy4, opWhile1},
	}}
)

func TestAnalyzeOneDevice(t *testing.T) {
	path := write(t, device0(), hostPlane())
	got := analyze(t, path, profile.Options{})
	if diff := cmp.Diff([]profile.Device{wantDevice}, got.Devices, approx); diff != "" {
		t.Errorf("device mismatch (-want +got):\n%s", diff)
	}
	// One device: the summary is the device.
	if diff := cmp.Diff(wantDevice.Figures, got.Summary, approx); diff != "" {
		t.Errorf("summary mismatch (-want +got):\n%s", diff)
	}
	if got.File != path || got.Events != 14+4+1 || len(got.Hostnames) != 1 {
		t.Errorf("report header: %q, %d events, hostnames %v", got.File, got.Events, got.Hostnames)
	}
	wantWarnings := []string{"/device:TPU:0: 2 op events (150 ns) started outside every step and are left out"}
	if diff := cmp.Diff(wantWarnings, got.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	// The report is data: it goes to JSON and back unchanged.
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var back profile.Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, &back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
	// Skipping the host plane changes nothing but the events decoded.
	skipped := analyze(t, path, profile.Options{Skip: true})
	if diff := cmp.Diff(got.Devices, skipped.Devices); diff != "" || skipped.Events != 14+4 {
		t.Errorf("with Skip (%d events): (-want +got):\n%s", skipped.Events, diff)
	}
}

func TestAnalyzeTwoDevices(t *testing.T) {
	path := write(t, hostPlane(), device0(), device1())
	got := analyze(t, path, profile.Options{DeviceType: "tpu-v5p", DeviceOps: 2})

	dev0 := wantDevice
	dev0.Ops = dev0.Ops[:2] // DeviceOps lists the first two
	opFusion2b := profile.Op{Name: "fusion.2", Category: "convolution fusion", Occurrences: 4, TimePs: 2_000_000, SelfTimePs: 2_000_000,
		SelfFraction: 2.0 / 2.25, Flops: 8_000_000, ModelFlops: 8_000_000, BytesAccessed: 400_000}
	opAllReduce := profile.Op{Name: "all-reduce.6", Category: "all-reduce", Occurrences: 10, TimePs: 300_000, SelfTimePs: 250_000,
		SelfFraction: 0.25 / 2.25, BytesAccessed: 10_000}
	dev1 := profile.Device{Plane: "/device:TPU:1", Kind: "tpu", Figures: profile.Figures{
		Window: profile.WindowSteps,
		Steps: profile.StepStats{Count: 4, TotalPs: 4_500_000, MeanPs: 1_125_000, MedianPs: 1_050_000,
			P90Ps: 1_380_000, MinPs: 900_000, MaxPs: 1_500_000},
		DeviceSteps: 4, WindowPs: 4_500_000,
		BusyPs: 2_000_000, IdlePs: 2_500_000, IdleFraction: 2.5 / 4.5, SelfTimePs: 2_250_000,
		Flops: 8_000_000, ModelFlops: 8_000_000, BytesAccessed: 410_000,
		Peak:                    profile.Peak{FLOPS: 459e12, FLOPSSource: "accelerator table (v5p)", HBMBytesPerSecond: 2765e9, HBMSource: "accelerator table (v5p)"},
		FlopsUtilization:        f(8e6 / (4.5e-6 * 459e12)),
		ModelFlopsUtilization:   f(8e6 / (4.5e-6 * 459e12)),
		HBMBandwidthUtilization: f(410e3 / (4.5e-6 * 2765e9)),
		Categories: []profile.Category{
			{Name: "convolution fusion", Ops: 1, Occurrences: 4, TimePs: 2_000_000, SelfTimePs: 2_000_000, SelfFraction: 2.0 / 2.25, Flops: 8_000_000, BytesAccessed: 400_000},
			{Name: "all-reduce", Ops: 1, Occurrences: 10, TimePs: 300_000, SelfTimePs: 250_000, SelfFraction: 0.25 / 2.25, BytesAccessed: 10_000},
		},
		OpCount: 2,
		Ops:     []profile.Op{opFusion2b, opAllReduce},
	}}
	if diff := cmp.Diff([]profile.Device{dev0, dev1}, got.Devices, approx); diff != "" {
		t.Errorf("devices mismatch (-want +got):\n%s", diff)
	}

	// The summary: each step as long as its slowest device
	// (1.1, 1.2, 0.9, 1.5 µs), everything else summed.
	frac := func(ps int64) float64 { return float64(ps) / 4_850_000 }
	flopsCap := 4.5e-6*1e14 + 4.5e-6*459e12
	bytesCap := 4.5e-6*1e12 + 4.5e-6*2765e9
	wantSum := profile.Figures{
		Window: profile.WindowSteps,
		Steps: profile.StepStats{Count: 4, TotalPs: 4_700_000, MeanPs: 1_175_000, MedianPs: 1_150_000,
			P90Ps: 1_410_000, MinPs: 900_000, MaxPs: 1_500_000},
		DeviceSteps: 8, WindowPs: 9_000_000,
		BusyPs: 4_600_000, IdlePs: 4_400_000, IdleFraction: 4.4 / 9, SelfTimePs: 4_850_000,
		Flops: 21_000_000, ModelFlops: 20_200_000, BytesAccessed: 2_110_000,
		Peak:                    profile.Peak{FLOPS: 1e14 + 459e12, FLOPSSource: "mixed", HBMBytesPerSecond: 1e12 + 2765e9, HBMSource: "mixed"},
		FlopsUtilization:        f(21e6 / flopsCap),
		ModelFlopsUtilization:   f(20.2e6 / flopsCap),
		HBMBandwidthUtilization: f(2.11e6 / bytesCap),
		OutsideWindow:           profile.OutsideWindow{Events: 2, TimePs: 150_000},
		Categories: []profile.Category{
			{Name: "convolution fusion", Ops: 2, Occurrences: 11, TimePs: 3_950_000, SelfTimePs: 3_900_000, SelfFraction: frac(3_900_000), Flops: 21_000_000, BytesAccessed: 900_000},
			{Name: "control flow", Ops: 1, Occurrences: 2, TimePs: 1_500_000, SelfTimePs: 350_000, SelfFraction: frac(350_000)},
			{Name: "data formatting", Ops: 1, Occurrences: 3, TimePs: 350_000, SelfTimePs: 350_000, SelfFraction: frac(350_000), BytesAccessed: 1_200_000},
			{Name: "all-reduce", Ops: 1, Occurrences: 10, TimePs: 300_000, SelfTimePs: 250_000, SelfFraction: frac(250_000), BytesAccessed: 10_000},
		},
		OpCount: 5,
		Ops: []profile.Op{
			{Name: "fusion.2", Category: "convolution fusion", Occurrences: 7, TimePs: 2_700_000, SelfTimePs: 2_650_000, SelfFraction: frac(2_650_000), Flops: 17_000_000, ModelFlops: 17_000_000, BytesAccessed: 700_000},
			{Name: "fusion.3", Category: "convolution fusion", Occurrences: 4, TimePs: 1_250_000, SelfTimePs: 1_250_000, SelfFraction: frac(1_250_000), Flops: 4_000_000, ModelFlops: 3_200_000, BytesAccessed: 200_000},
			{Name: "copy.4", Category: "data formatting", Occurrences: 3, TimePs: 350_000, SelfTimePs: 350_000, SelfFraction: frac(350_000), BytesAccessed: 1_200_000},
			{Name: "while.1", Category: "control flow", Occurrences: 2, TimePs: 1_500_000, SelfTimePs: 350_000, SelfFraction: frac(350_000)},
			{Name: "all-reduce.6", Category: "all-reduce", Occurrences: 10, TimePs: 300_000, SelfTimePs: 250_000, SelfFraction: frac(250_000), BytesAccessed: 10_000},
		},
	}
	if diff := cmp.Diff(wantSum, got.Summary, approx); diff != "" {
		t.Errorf("summary mismatch (-want +got):\n%s", diff)
	}
	wantWarnings := []string{
		"/device:TPU:0: 2 op events (150 ns) started outside every step and are left out",
		"/device:TPU:1: 1 aggregated op events have no start: counted in the op totals, not in busy time",
	}
	if diff := cmp.Diff(wantWarnings, got.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

func TestPeaks(t *testing.T) {
	path := write(t, device1())
	tests := []struct {
		name string
		opts profile.Options
		want profile.Peak
		warn string
	}{
		{"none", profile.Options{}, profile.Peak{}, "no peak FLOP/s or HBM bandwidth"},
		{"table, per JAX device of a v7x", profile.Options{DeviceType: "ironwood"},
			profile.Peak{FLOPS: 2307e12 / 2, FLOPSSource: "accelerator table (v7x)", HBMBytesPerSecond: 7380e9 / 2, HBMSource: "accelerator table (v7x)"}, ""},
		{"options win", profile.Options{DeviceType: "v5p", PeakFLOPS: 1e15},
			profile.Peak{FLOPS: 1e15, FLOPSSource: "options", HBMBytesPerSecond: 2765e9, HBMSource: "accelerator table (v5p)"}, ""},
		{"a GPU type on a TPU", profile.Options{DeviceType: "h100"}, profile.Peak{}, "device type nvidia-h100-80gb is not a TPU"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := analyze(t, path, tt.opts)
			if diff := cmp.Diff(tt.want, got.Devices[0].Peak); diff != "" {
				t.Errorf("peak (-want +got):\n%s", diff)
			}
			if (got.Devices[0].FlopsUtilization == nil) != (tt.want.FLOPS == 0) {
				t.Errorf("FlopsUtilization = %v with peak %g", got.Devices[0].FlopsUtilization, tt.want.FLOPS)
			}
			if tt.warn != "" && !strings.Contains(strings.Join(got.Warnings, "\n"), tt.warn) {
				t.Errorf("warnings %q lack %q", got.Warnings, tt.warn)
			}
		})
	}
	if _, err := profile.AnalyzeFile(context.Background(), path, profile.Options{DeviceType: "v99"}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("unknown device type: %v", err)
	}
}

// TestNoSteps: without a Steps line the window is the ops' span.
func TestNoSteps(t *testing.T) {
	b := xplanetest.NewPlane(1, "/device:TPU:0")
	ops := b.Line(1, "XLA Ops", t0)
	xplanetest.Event(ops, b.OpID(fusion2), 1_000, 3_000)
	xplanetest.Event(ops, b.OpID(copy4), 6_000, 1_000)
	got := analyze(t, write(t, b.Plane), profile.Options{})
	s := got.Summary
	if s.Window != profile.WindowOps || s.WindowPs != 6_000 || s.BusyPs != 4_000 || s.IdlePs != 2_000 || s.Steps.Count != 0 || s.OpCount != 2 {
		t.Errorf("window %q of %d ps, busy %d, idle %d, %d steps, %d ops", s.Window, s.WindowPs, s.BusyPs, s.IdlePs, s.Steps.Count, s.OpCount)
	}
}

// TestGPUWithoutOpsLine: a GPU plane as CUPTI writes it has stream lines
// and no XLA Ops line; its steps are still analysed and the gap is said.
func TestGPUWithoutOpsLine(t *testing.T) {
	b := xplanetest.NewPlane(1, "/device:GPU:0")
	steps := b.Line(1, "Steps", t0)
	xplanetest.Event(steps, b.EventID("0"), 0, 7_000)
	xplanetest.Event(steps, b.EventID("1"), 7_000, 9_000)
	stream := b.Line(2, "Stream #13(Compute)", t0)
	xplanetest.Event(stream, b.EventID("sm90_xmma_gemm"), 0, 5_000)
	got := analyze(t, write(t, b.Plane), profile.Options{DeviceType: "h100"})
	d := got.Devices[0]
	if d.Kind != "gpu" || d.Steps.Count != 2 || d.Steps.MedianPs != 8_000 || d.OpCount != 0 || d.IdlePs != 16_000 || d.Peak.FLOPS != 989e12 {
		t.Errorf("GPU device: %+v", d)
	}
	if !strings.Contains(strings.Join(got.Warnings, "\n"), `/device:GPU:0 has no "XLA Ops" line`) {
		t.Errorf("warnings: %q", got.Warnings)
	}
}

func TestNoDevices(t *testing.T) {
	path := write(t, hostPlane())
	_, err := profile.AnalyzeFile(context.Background(), path, profile.Options{})
	if !profile.IsNoDevices(err) || !errors.Is(err, errdefs.ErrInvalid) ||
		err.Error() != path+" has no device planes (/device:TPU:N or /device:GPU:N) to analyse; its planes: /host:CPU" {
		t.Errorf("got %v", err)
	}
}

// TestCorruptFileIsRefused: a truncated profile, and one with a flipped
// byte in its device plane, give an error naming the file and no report.
func TestCorruptFileIsRefused(t *testing.T) {
	path := write(t, device0(), hostPlane())
	raw, _ := os.ReadFile(path)
	cut := filepath.Join(t.TempDir(), "cut.xplane.pb")
	os.WriteFile(cut, raw[:len(raw)*2/3], 0o644)
	flipped := filepath.Join(t.TempDir(), "flipped.xplane.pb")
	b := append([]byte(nil), raw...)
	b[3] ^= 0x07 // inside the device plane's first field: a tag with wire type 3..7 or a broken length
	os.WriteFile(flipped, b, 0o644)
	for _, p := range []string{cut, flipped} {
		r, err := profile.AnalyzeFile(context.Background(), p, profile.Options{})
		var ce *xplane.CorruptError
		if r != nil || !errors.As(err, &ce) || ce.File != p || !strings.HasPrefix(err.Error(), p+": not a valid XSpace profile at byte ") {
			t.Errorf("%s: report %v, error %v", p, r != nil, err)
		}
	}
}

func TestCompare(t *testing.T) {
	a := analyze(t, write(t, device0(), device1()), profile.Options{DeviceType: "v5p"})
	b := analyze(t, write(t, runB()), profile.Options{})
	got := profile.Compare(a, b)

	// Per device-step: A's times over 8 device-steps, B's over 2.
	rel := func(a, b float64) *float64 { return f((b - a) / a) }
	fusion2 := profile.OpDiff{Name: "fusion.2", Category: "convolution fusion", A: 331_250, B: 600_000, Delta: 268_750, Relative: rel(331_250, 600_000)}
	copy4 := profile.OpDiff{Name: "copy.4", Category: "data formatting", A: 43_750, B: 100_000, Delta: 56_250, Relative: rel(43_750, 100_000)}
	flopsCapA := 4.5e-6*1e14 + 4.5e-6*459e12
	bytesCapA := 4.5e-6*1e12 + 4.5e-6*2765e9
	d := func(a, b float64) *profile.Delta {
		return &profile.Delta{A: a, B: b, Delta: b - a, Relative: rel(a, b)}
	}
	want := &profile.Diff{
		A: a.File, B: b.File, Basis: "per device-step",
		StepTimeMean:            d(1_175_000, 1_000_000),
		StepTimeMedian:          d(1_150_000, 1_000_000),
		FlopsUtilization:        d(21e6/flopsCapA, 4e6/(2e-6*1e14)),
		ModelFlopsUtilization:   d(20.2e6/flopsCapA, 4e6/(2e-6*1e14)),
		HBMBandwidthUtilization: d(2.11e6/bytesCapA, 1e6/(2e-6*1e12)),
		IdleFraction:            d(4.4/9, 0.25),
		Categories: []profile.OpDiff{
			{Name: "convolution fusion", A: 487_500, B: 600_000, Delta: 112_500, Relative: rel(487_500, 600_000)},
			{Name: "data formatting", A: 43_750, B: 100_000, Delta: 56_250, Relative: rel(43_750, 100_000)},
			{Name: "convolution", A: 0, B: 50_000, Delta: 50_000},
			{Name: "control flow", A: 43_750, B: 0, Delta: -43_750, Relative: f(-1)},
			{Name: "all-reduce", A: 31_250, B: 0, Delta: -31_250, Relative: f(-1)},
		},
		Ops:          []profile.OpDiff{fusion2, copy4},
		MostRelative: []profile.OpDiff{copy4, fusion2},
		OnlyInA:      []profile.Op{a.Summary.Ops[1], a.Summary.Ops[3], a.Summary.Ops[4]},
		OnlyInB:      []profile.Op{b.Summary.Ops[2]},
	}
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("Compare mismatch (-want +got):\n%s", diff)
	}
	if names := []string{got.OnlyInA[0].Name, got.OnlyInA[1].Name, got.OnlyInA[2].Name, got.OnlyInB[0].Name}; !cmp.Equal(names, []string{"fusion.3", "while.1", "all-reduce.6", "new.7"}) {
		t.Errorf("only in one run: %v", names)
	}

	// A run compared with itself changes nothing.
	self := profile.Compare(a, a)
	for _, o := range self.Ops {
		if o.Delta != 0 {
			t.Errorf("%s changed against itself: %+v", o.Name, o)
		}
	}
	if len(self.OnlyInA)+len(self.OnlyInB) != 0 || self.StepTimeMean.Delta != 0 {
		t.Errorf("self-compare: %+v", self)
	}
}

func TestMarkdown(t *testing.T) {
	a := analyze(t, write(t, device0(), device1()), profile.Options{DeviceType: "v5p"})
	b := analyze(t, write(t, runB()), profile.Options{})
	md := a.Markdown(3)
	for _, s := range []string{"| steps | 4 |", "| step time mean / median / p90 | 1.18 µs / 1.15 µs / 1.41 µs |",
		"| convolution fusion | 2 | 3.9 µs | 80.4% |", "| fusion.2 | convolution fusion | 7 | 2.65 µs | 54.6% | 2.7 µs |"} {
		if !strings.Contains(md, s) {
			t.Errorf("report Markdown lacks %q:\n%s", s, md)
		}
	}
	if strings.Contains(md, "| while.1 |") {
		t.Errorf("report Markdown lists more than 3 ops:\n%s", md)
	}
	dm := profile.Compare(a, b).Markdown(10)
	for _, s := range []string{"| step time mean | 1.18 µs | 1 µs | -175 ns | -14.9% |", "| fusion.2 | convolution fusion | 331 ns | 600 ns | 269 ns | +81.1% |",
		"Only in A: fusion.3, while.1, all-reduce.6", "Only in B: new.7"} {
		if !strings.Contains(dm, s) {
			t.Errorf("diff Markdown lacks %q:\n%s", s, dm)
		}
	}
}

// TestOutOfOrderOps: ops a writer left unsorted are not nested into the
// wrong parent; the report says nesting may be off.
func TestOutOfOrderOps(t *testing.T) {
	b := xplanetest.NewPlane(1, "/device:TPU:0")
	ops := b.Line(1, "XLA Ops", t0)
	xplanetest.Event(ops, b.OpID(fusion2), 5_000, 1_000)
	xplanetest.Event(ops, b.OpID(copy4), 1_000, 2_000)
	got := analyze(t, write(t, b.Plane), profile.Options{})
	s := got.Summary
	if s.SelfTimePs != 3_000 || s.BusyPs != 3_000 || s.WindowPs != 5_000 {
		t.Errorf("self %d, busy %d, window %d", s.SelfTimePs, s.BusyPs, s.WindowPs)
	}
	if !strings.Contains(strings.Join(got.Warnings, "\n"), "1 op events started before the one before them") {
		t.Errorf("warnings: %q", got.Warnings)
	}
}

// TestMaxOps: a summary cut to MaxOps ops says so, and a comparison of it
// warns that ops only in one run may be missed.
func TestMaxOps(t *testing.T) {
	path := write(t, device0())
	a := analyze(t, path, profile.Options{MaxOps: 1, DeviceOps: -1})
	if a.Summary.OpCount != 4 || len(a.Summary.Ops) != 1 || len(a.Devices[0].Ops) != 4 {
		t.Errorf("summary lists %d of %d ops; device lists %d", len(a.Summary.Ops), a.Summary.OpCount, len(a.Devices[0].Ops))
	}
	d := profile.Compare(a, analyze(t, path, profile.Options{}))
	if !strings.Contains(strings.Join(d.Warnings, "\n"), "a summary lists 1 of its 4 ops") {
		t.Errorf("warnings: %q", d.Warnings)
	}
}
