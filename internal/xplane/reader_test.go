package xplane_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	xplanev1 "github.com/falconhq/falcon/api/xplane/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/xplane"
	"github.com/falconhq/falcon/internal/xplane/xplanetest"
)

// recorder keeps everything a walk hands it, to compare with what was
// written.
type recorder struct {
	planes []recPlane
	order  func(p *xplane.Plane) []int
}

type recPlane struct {
	ID            int64
	Name          string
	Stats         []xplane.Stat
	EventMetadata map[int64]*xplane.EventMetadata
	StatMetadata  map[int64]*xplane.StatMetadata
	Lines         []recLine
}

type recLine struct {
	Header xplane.LineHeader
	Events []xplane.Event
}

func (r *recorder) Plane(p *xplane.Plane) []int {
	r.planes = append(r.planes, recPlane{ID: p.ID, Name: p.Name, Stats: p.Stats, EventMetadata: p.EventMetadata, StatMetadata: p.StatMetadata})
	if r.order != nil {
		return r.order(p)
	}
	idx := make([]int, len(p.Lines))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

func (r *recorder) Line(p *xplane.Plane, l *xplane.LineHeader) {
	rp := &r.planes[len(r.planes)-1]
	rp.Lines = append(rp.Lines, recLine{Header: *l})
}

func (r *recorder) Event(e *xplane.Event) {
	rp := &r.planes[len(r.planes)-1]
	rl := &rp.Lines[len(rp.Lines)-1]
	c := *e
	c.Stats = slices.Clone(e.Stats)
	rl.Events = append(rl.Events, c)
}

func (r *recorder) EndLine() {}

// want converts what the generated types hold into what a walk must
// report: bytes values become their length.
func want(space *xplanev1.XSpace) []recPlane {
	var out []recPlane
	for _, p := range space.Planes {
		rp := recPlane{ID: p.Id, Name: p.Name, Stats: stats(p.Stats),
			EventMetadata: map[int64]*xplane.EventMetadata{}, StatMetadata: map[int64]*xplane.StatMetadata{}}
		for k, m := range p.EventMetadata {
			rp.EventMetadata[k] = &xplane.EventMetadata{ID: m.Id, Name: m.Name, DisplayName: m.DisplayName, Stats: stats(m.Stats), ChildIDs: m.ChildId}
		}
		for k, m := range p.StatMetadata {
			rp.StatMetadata[k] = &xplane.StatMetadata{ID: m.Id, Name: m.Name, Description: m.Description}
		}
		for _, l := range p.Lines {
			rl := recLine{Header: xplane.LineHeader{ID: l.Id, DisplayID: l.DisplayId, Name: l.Name, DisplayName: l.DisplayName,
				TimestampNs: l.TimestampNs, DurationPs: l.DurationPs, Events: int64(len(l.Events))}}
			for _, e := range l.Events {
				rl.Events = append(rl.Events, xplane.Event{MetadataID: e.MetadataId, OffsetPs: e.GetOffsetPs(),
					NumOccurrences: e.GetNumOccurrences(), DurationPs: e.DurationPs, Stats: stats(e.Stats)})
			}
			rp.Lines = append(rp.Lines, rl)
		}
		out = append(out, rp)
	}
	return out
}

func stats(in []*xplanev1.XStat) []xplane.Stat {
	var out []xplane.Stat
	for _, s := range in {
		o := xplane.Stat{MetadataID: s.MetadataId}
		switch v := s.Value.(type) {
		case *xplanev1.XStat_DoubleValue:
			o.Kind, o.Double = xplane.KindDouble, v.DoubleValue
		case *xplanev1.XStat_Uint64Value:
			o.Kind, o.Uint64 = xplane.KindUint64, v.Uint64Value
		case *xplanev1.XStat_Int64Value:
			o.Kind, o.Int64 = xplane.KindInt64, v.Int64Value
		case *xplanev1.XStat_StrValue:
			o.Kind, o.Str = xplane.KindStr, v.StrValue
		case *xplanev1.XStat_BytesValue:
			o.Kind, o.Len = xplane.KindBytes, len(v.BytesValue)
		case *xplanev1.XStat_RefValue:
			o.Kind, o.Ref = xplane.KindRef, v.RefValue
		}
		out = append(out, o)
	}
	return out
}

// everyField is an XSpace that sets every field of every message, each
// oneof value kind, negative numbers, a packed child_id and an aggregated
// event.
func everyField() *xplanev1.XSpace {
	dev := xplanetest.NewPlane(7, "/device:TPU:0")
	dev.Peak(459, 2765)
	op := dev.OpID(xplanetest.Op{Name: "fusion.1", Category: "convolution", Flops: 1000, Bytes: 64})
	m := dev.Metadata("fusion.1")
	m.DisplayName = "fusion.1 (display)"
	m.Metadata = []byte{1, 2, 3, 4}
	m.ChildId = []int64{2, 3, 1 << 40}
	m.Stats = append(m.Stats,
		&xplanev1.XStat{MetadataId: dev.StatID("tf_op"), Value: &xplanev1.XStat_StrValue{StrValue: "jit(train)/dot_general ✓"}},
		&xplanev1.XStat{MetadataId: dev.StatID("memory_access_breakdown"), Value: &xplanev1.XStat_BytesValue{BytesValue: []byte("opaque")}},
		&xplanev1.XStat{MetadataId: dev.StatID("negative"), Value: &xplanev1.XStat_Int64Value{Int64Value: -42}},
		&xplanev1.XStat{MetadataId: dev.StatID("unset")})
	dev.Plane.StatMetadata[dev.StatID("flops")].Description = "floating-point operations"
	steps := dev.Line(1, "Steps", 1_700_000_000_123_456_789)
	steps.DisplayName = "Steps (display)"
	steps.DurationPs = 9_000_000
	xplanetest.Event(steps, dev.EventID("0"), 0, 5_000_000)
	xplanetest.Event(steps, dev.EventID("1"), 5_000_000, 4_000_000, &xplanev1.XStat{MetadataId: dev.StatID("step_num"), Value: &xplanev1.XStat_Uint64Value{Uint64Value: 1 << 63}})
	ops := dev.Line(3, "XLA Ops", 1_700_000_000_123_456_789)
	xplanetest.Event(ops, op, 100, 900, &xplanev1.XStat{MetadataId: dev.StatID("x"), Value: &xplanev1.XStat_DoubleValue{DoubleValue: -0.5}})
	ops.Events = append(ops.Events, &xplanev1.XEvent{MetadataId: op, Data: &xplanev1.XEvent_NumOccurrences{NumOccurrences: 12}, DurationPs: 12_000})
	xplanetest.Event(ops, op, 2_000, 10,
		&xplanev1.XStat{MetadataId: dev.StatID("name"), Value: &xplanev1.XStat_StrValue{StrValue: "ünïcode"}},
		&xplanev1.XStat{MetadataId: dev.StatID("blob"), Value: &xplanev1.XStat_BytesValue{BytesValue: make([]byte, 300)}},
		&xplanev1.XStat{MetadataId: dev.StatID("ref"), Value: &xplanev1.XStat_RefValue{RefValue: 3}})
	// A field this version of the format does not know is stepped over.
	odd := xplanetest.Event(ops, op, 3_000, 10)
	odd.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 7))
	dev.Line(4, "empty", 0)

	host := xplanetest.NewPlane(8, "/host:CPU")
	hl := host.Line(100, "python3", 1_700_000_000_000_000_000)
	xplanetest.Event(hl, host.EventID("train_step"), 1<<50, 1<<40)
	return &xplanev1.XSpace{
		Planes:    []*xplanev1.XPlane{dev.Plane, host.Plane},
		Errors:    []string{"lost 3 events"},
		Warnings:  []string{"clock skew"},
		Hostnames: []string{"host-0"},
	}
}

func writeSpace(t testing.TB, space *xplanev1.XSpace) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "host-0.xplane.pb")
	if err := xplanetest.WriteFile(path, space); err != nil {
		t.Fatal(err)
	}
	return path
}

func walkFile(t testing.TB, path string, opts xplane.WalkOptions, v xplane.Visitor) (xplane.Summary, error) {
	t.Helper()
	f, err := xplane.Open(path, xplane.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return f.Walk(context.Background(), opts, v)
}

var cmpOpts = []cmp.Option{cmpopts.IgnoreUnexported(xplane.LineHeader{}), cmpopts.EquateEmpty()}

func TestWalkReadsEveryField(t *testing.T) {
	space := everyField()
	path := writeSpace(t, space)
	// The generated code agrees with itself on the file, so the test is
	// about the walk.
	raw, _ := os.ReadFile(path)
	var back xplanev1.XSpace
	if err := proto.Unmarshal(raw, &back); err != nil || !proto.Equal(&back, space) {
		t.Fatalf("the file does not round-trip through the generated code: %v", err)
	}

	var r recorder
	sum, err := walkFile(t, path, xplane.WalkOptions{}, &r)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want(space), r.planes, cmpOpts...); diff != "" {
		t.Errorf("walk mismatch (-want +got):\n%s", diff)
	}
	wantSum := xplane.Summary{Bytes: int64(len(raw)), BytesRead: int64(len(raw)), Planes: 2, PlanesVisited: 2, Events: 7, EventsVisited: 7,
		Hostnames: []string{"host-0"}, Errors: []string{"lost 3 events"}, Warnings: []string{"clock skew"}}
	if diff := cmp.Diff(wantSum, sum); diff != "" {
		t.Errorf("summary mismatch (-want +got):\n%s", diff)
	}
}

func TestWalkSelectsPlanesAndOrdersLines(t *testing.T) {
	space := everyField()
	path := writeSpace(t, space)
	devOnly := func(name string) bool { return strings.HasPrefix(name, "/device:") }
	reverse := func(p *xplane.Plane) []int { return []int{2, 1, 0, 1, 7, -1} } // repeats and bad indexes are ignored

	all := want(space)
	dev := all[0]
	wantPlanes := []recPlane{{ID: dev.ID, Name: dev.Name, Stats: dev.Stats, EventMetadata: dev.EventMetadata, StatMetadata: dev.StatMetadata,
		Lines: []recLine{dev.Lines[2], dev.Lines[1], dev.Lines[0]}}}

	for _, skip := range []bool{false, true} {
		r := recorder{order: reverse}
		sum, err := walkFile(t, path, xplane.WalkOptions{Planes: devOnly, Skip: skip}, &r)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantPlanes, r.planes, cmpOpts...); diff != "" {
			t.Errorf("skip=%v: walk mismatch (-want +got):\n%s", skip, diff)
		}
		// Without Skip the host plane is decoded too; with it, it is jumped over.
		wantEvents := int64(7)
		if skip {
			wantEvents = 6
		}
		if sum.PlanesVisited != 1 || sum.EventsVisited != 6 || sum.Events != wantEvents {
			t.Errorf("skip=%v: summary %+v", skip, sum)
		}
	}
}

func TestGzip(t *testing.T) {
	space := everyField()
	raw, err := proto.Marshal(space)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	path := filepath.Join(t.TempDir(), "host-0.xplane.pb.gz")
	os.WriteFile(path, gz.Bytes(), 0o644)

	var r recorder
	sum, err := walkFile(t, path, xplane.WalkOptions{}, &r)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want(space), r.planes, cmpOpts...); diff != "" {
		t.Errorf("walk mismatch (-want +got):\n%s", diff)
	}
	if sum.Bytes != int64(len(raw)) {
		t.Errorf("Bytes = %d, want the decompressed %d", sum.Bytes, len(raw))
	}

	// A gzip stream cut short is refused by name, as is a corrupt XSpace inside one.
	cut := filepath.Join(t.TempDir(), "cut.xplane.pb.gz")
	os.WriteFile(cut, gz.Bytes()[:gz.Len()-10], 0o644)
	if _, err := xplane.Open(cut, xplane.OpenOptions{}); !isCorrupt(err, cut) {
		t.Errorf("Open of a cut gzip: %v", err)
	}
	gz.Reset()
	zw = gzip.NewWriter(&gz)
	zw.Write(raw[:len(raw)-3])
	zw.Close()
	os.WriteFile(cut, gz.Bytes(), 0o644)
	_, err = walkFile(t, cut, xplane.WalkOptions{}, &recorder{})
	var ce *xplane.CorruptError
	if !errors.As(err, &ce) || ce.File != cut || !ce.Decompressed || !strings.Contains(err.Error(), "of the decompressed stream") {
		t.Errorf("walk of a truncated XSpace in gzip: %v", err)
	}
}

func isCorrupt(err error, path string) bool {
	var ce *xplane.CorruptError
	return errors.As(err, &ce) && ce.File == path && strings.HasPrefix(err.Error(), path+": ") && errors.Is(err, errdefs.ErrInvalid)
}

// topLevelEnds returns the offsets where a top-level XSpace field ends: a
// file cut there is a valid, shorter XSpace.
func topLevelEnds(t *testing.T, space *xplanev1.XSpace) map[int]bool {
	ends := map[int]bool{0: true}
	n := 0
	for _, p := range space.Planes {
		b, _ := proto.Marshal(&xplanev1.XSpace{Planes: []*xplanev1.XPlane{p}})
		n += len(b)
		ends[n] = true
	}
	for _, list := range [][]string{space.Errors, space.Warnings, space.Hostnames} {
		for _, s := range list {
			b, _ := proto.Marshal(&xplanev1.XSpace{Errors: []string{s}})
			n += len(b)
			ends[n] = true
		}
	}
	return ends
}

// TestTruncatedIsRefused cuts the file at every length: each is refused
// naming the file and an offset inside what is left, except a cut between
// two top-level fields, which protobuf cannot tell from a shorter XSpace.
func TestTruncatedIsRefused(t *testing.T) {
	space := everyField()
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(space)
	if err != nil {
		t.Fatal(err)
	}
	ends := topLevelEnds(t, space)
	dir := t.TempDir()
	for n := 1; n < len(raw); n++ {
		path := filepath.Join(dir, "cut.xplane.pb")
		os.WriteFile(path, raw[:n], 0o644)
		_, err := walkFile(t, path, xplane.WalkOptions{}, &recorder{})
		if ends[n] {
			if err != nil {
				t.Errorf("cut at %d, a field boundary: %v", n, err)
			}
			continue
		}
		var ce *xplane.CorruptError
		if !isCorrupt(err, path) || !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > int64(n) {
			t.Fatalf("cut at %d of %d: got %v", n, len(raw), err)
		}
		if n == len(raw)-1 && !strings.Contains(err.Error(), "truncated?") {
			t.Errorf("cut at %d: %v does not say the file may be truncated", n, err)
		}
	}
}

func TestCorruptIsRefused(t *testing.T) {
	space := everyField()
	raw, _ := proto.MarshalOptions{Deterministic: true}.Marshal(space)
	tests := []struct {
		name   string
		mutate func(b []byte) []byte
		offset int64
		detail string
	}{
		{"wire type 7 at the start", func(b []byte) []byte { b[0] = 0x0f; return b }, 0, "wire type 7"},
		{"field number 0", func(b []byte) []byte { b[0] = 0x02; return b }, 0, "field number 0"},
		{"a plane longer than the file", func(b []byte) []byte {
			return append([]byte{0x0a, 0xff, 0xff, 0x03}, b...)
		}, 1, "XSpace.planes is 65535 bytes, but the file ends"},
		{"a varint that never ends", func(b []byte) []byte {
			return append(b, 0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)
		}, int64(len(raw)) + 1, "bad varint"},
		{"a known field with the wrong wire type", func(b []byte) []byte {
			return append(b, 0x0d, 0, 0, 0, 0) // planes as fixed32
		}, int64(len(raw)), "XSpace.planes has wire type 5, want 2"},
		{"a name that is not UTF-8", func(b []byte) []byte {
			return append(b, 0x22, 0x02, 0xff, 0xfe) // hostnames
		}, int64(len(raw)) + 2, "XSpace.hostnames is not UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.xplane.pb")
			os.WriteFile(path, tt.mutate(slices.Clone(raw)), 0o644)
			_, err := walkFile(t, path, xplane.WalkOptions{}, &recorder{})
			var ce *xplane.CorruptError
			if !isCorrupt(err, path) || !errors.As(err, &ce) {
				t.Fatalf("got %v, want a CorruptError naming %s", err, path)
			}
			if ce.Offset != tt.offset || !strings.Contains(ce.Detail, tt.detail) {
				t.Errorf("got offset %d %q, want offset %d and %q", ce.Offset, ce.Detail, tt.offset, tt.detail)
			}
		})
	}
}

// TestFlippedBytes flips random bytes of a valid file: every walk either
// succeeds (the flip landed in a value) or is refused by name with an
// offset in the file, and none panics. With Skip, a flip inside a part
// that is jumped over may go unnoticed; without it, a flip in a length or
// tag of any part is found.
func TestFlippedBytes(t *testing.T) {
	space := everyField()
	raw, _ := proto.MarshalOptions{Deterministic: true}.Marshal(space)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	refused := 0
	for i := 0; i < 3000; i++ {
		b := slices.Clone(raw)
		for j := 0; j <= i%3; j++ {
			b[rng.IntN(len(b))] ^= byte(1 << rng.IntN(8))
		}
		path := filepath.Join(dir, "flipped.xplane.pb")
		os.WriteFile(path, b, 0o644)
		_, err := walkFile(t, path, xplane.WalkOptions{Skip: i%2 == 1}, &recorder{})
		if err == nil {
			continue
		}
		var ce *xplane.CorruptError
		if !isCorrupt(err, path) || !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > int64(len(b)) {
			t.Fatalf("flip %d: %v", i, err)
		}
		refused++
	}
	if refused < 1000 {
		t.Errorf("only %d of 3000 flipped files were refused", refused)
	}
	t.Logf("%d of 3000 flipped files refused", refused)
}

func TestContextCancelled(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "big.xplane.pb")
	s := syntheticSpec()
	s.Steps = 20
	if _, err := xplanetest.WriteSynthetic(path, s); err != nil {
		t.Fatal(err)
	}
	f, err := xplane.Open(path, xplane.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Walk(ctx, xplane.WalkOptions{}, &counter{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Walk with a cancelled context: %v", err)
	}
}
