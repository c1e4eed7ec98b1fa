package xplanetest

import (
	"bufio"
	"fmt"
	"os"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	xplanev1 "github.com/falconhq/falcon/api/xplane/v1"
)

// Stat names of XProf's xplane_schema that the tests use.
const (
	StatFlops          = "flops"
	StatModelFlops     = "model_flops"
	StatBytesAccessed  = "bytes_accessed"
	StatHloCategory    = "hlo_category"
	StatGroupID        = "group_id"
	StatSelfDurationPs = "self_duration_ps"
	StatPeakTeraflops  = "peak_teraflops_per_second"
	StatPeakHBMGBps    = "peak_hbm_bw_gigabytes_per_second"
)

// Op is an HLO op of a test profile.
type Op struct {
	Name       string
	Category   string
	Flops      uint64
	ModelFlops uint64 // 0: not set
	Bytes      uint64
}

// Builder assembles one XPlane with the generated types, interning event
// and stat metadata as XProf's writers do.
type Builder struct {
	Plane  *xplanev1.XPlane
	events map[string]int64
	stats  map[string]int64
}

// NewPlane starts a plane named name (e.g. "/device:TPU:0").
func NewPlane(id int64, name string) *Builder {
	return &Builder{
		Plane: &xplanev1.XPlane{Id: id, Name: name,
			EventMetadata: map[int64]*xplanev1.XEventMetadata{}, StatMetadata: map[int64]*xplanev1.XStatMetadata{}},
		events: map[string]int64{}, stats: map[string]int64{},
	}
}

// StatID returns the stat metadata id of name, adding it if new.
func (b *Builder) StatID(name string) int64 {
	if id, ok := b.stats[name]; ok {
		return id
	}
	id := int64(len(b.stats) + 1)
	b.stats[name] = id
	b.Plane.StatMetadata[id] = &xplanev1.XStatMetadata{Id: id, Name: name}
	return id
}

// EventID returns the event metadata id of name, adding it if new.
func (b *Builder) EventID(name string) int64 {
	if id, ok := b.events[name]; ok {
		return id
	}
	id := int64(len(b.events) + 1)
	b.events[name] = id
	b.Plane.EventMetadata[id] = &xplanev1.XEventMetadata{Id: id, Name: name}
	return id
}

// Metadata returns the event metadata of name.
func (b *Builder) Metadata(name string) *xplanev1.XEventMetadata {
	return b.Plane.EventMetadata[b.EventID(name)]
}

// OpID returns the event metadata id of op, with its hlo_category, flops,
// model_flops and bytes_accessed stats on the metadata, as a TPU's XLA Ops
// carry them. The category is a ref_value (XProf interns repeated strings
// that way); flops are uint64 and bytes int64, as both occur.
func (b *Builder) OpID(op Op) int64 {
	id := b.EventID(op.Name)
	m := b.Plane.EventMetadata[id]
	if len(m.Stats) > 0 {
		return id
	}
	if op.Category != "" {
		m.Stats = append(m.Stats, &xplanev1.XStat{MetadataId: b.StatID(StatHloCategory),
			Value: &xplanev1.XStat_RefValue{RefValue: uint64(b.StatID(op.Category))}})
	}
	m.Stats = append(m.Stats,
		&xplanev1.XStat{MetadataId: b.StatID(StatFlops), Value: &xplanev1.XStat_Uint64Value{Uint64Value: op.Flops}},
		&xplanev1.XStat{MetadataId: b.StatID(StatBytesAccessed), Value: &xplanev1.XStat_Int64Value{Int64Value: int64(op.Bytes)}})
	if op.ModelFlops > 0 {
		m.Stats = append(m.Stats, &xplanev1.XStat{MetadataId: b.StatID(StatModelFlops),
			Value: &xplanev1.XStat_Uint64Value{Uint64Value: op.ModelFlops}})
	}
	return id
}

// Line adds a line.
func (b *Builder) Line(id int64, name string, timestampNs int64) *xplanev1.XLine {
	l := &xplanev1.XLine{Id: id, DisplayId: id, Name: name, TimestampNs: timestampNs}
	b.Plane.Lines = append(b.Plane.Lines, l)
	return l
}

// Event adds an event of metadata id to l.
func Event(l *xplanev1.XLine, metadataID, offsetPs, durationPs int64, stats ...*xplanev1.XStat) *xplanev1.XEvent {
	e := &xplanev1.XEvent{MetadataId: metadataID, Data: &xplanev1.XEvent_OffsetPs{OffsetPs: offsetPs}, DurationPs: durationPs, Stats: stats}
	l.Events = append(l.Events, e)
	return e
}

// Peak adds the device's peak figures as plane stats, as XProf records
// them (TFLOP/s and GB/s, doubles).
func (b *Builder) Peak(teraflops, hbmGBps float64) {
	b.Plane.Stats = append(b.Plane.Stats,
		&xplanev1.XStat{MetadataId: b.StatID(StatPeakTeraflops), Value: &xplanev1.XStat_DoubleValue{DoubleValue: teraflops}},
		&xplanev1.XStat{MetadataId: b.StatID(StatPeakHBMGBps), Value: &xplanev1.XStat_DoubleValue{DoubleValue: hbmGBps}})
}

// WriteFile marshals space to path.
func WriteFile(path string, space *xplanev1.XSpace) error {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(space)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// SyntheticOp is an op of a synthetic step; its children run back to back
// from its start, nested in it on the XLA Ops line.
type SyntheticOp struct {
	Op
	DurationPs int64
	Children   []SyntheticOp
}

// Synthetic describes a large TPU profile: Devices planes of Steps steps;
// each step is LeadPs of idle, then Repeat runs of Pattern back to back,
// then TailPs of idle. Run r uses variant r % Variants of the pattern's
// ops (distinct metadata, names suffixed "#v"), so the profile has
// Variants times as many distinct ops. A host plane adds HostEvents
// events per step that no device analysis reads.
type Synthetic struct {
	Devices    int
	Steps      int
	Repeat     int
	Variants   int
	LeadPs     int64
	TailPs     int64
	Pattern    []SyntheticOp
	HostEvents int
	// EventStats gives every op event a group_id stat, as XProf's grouping
	// adds, which makes events the size they have in real files.
	EventStats bool
	// PeakTeraflops and PeakHBMGBps, when set, are written as plane stats.
	PeakTeraflops, PeakHBMGBps float64
}

// TPUSteps is the synthetic profile of the tests and benchmarks: per
// step, 200 runs of a while loop (two fusions nested in it), a
// convolution, an all-reduce and a copy, in 50 variants (300 distinct
// ops), with a group_id stat on every event and 100 host events per step;
// peaks of a v5p. Set Devices and Steps (StepsFor sizes a file).
func TPUSteps() Synthetic {
	return Synthetic{
		Devices: 1, Steps: 1, Repeat: 200, Variants: 50, LeadPs: 10_000, TailPs: 5_000,
		Pattern: []SyntheticOp{
			{Op: Op{Name: "while.1", Category: "control flow"}, DurationPs: 40_000, Children: []SyntheticOp{
				{Op: Op{Name: "fusion.2", Category: "convolution fusion", Flops: 3_000_000, Bytes: 400_000}, DurationPs: 15_000},
				{Op: Op{Name: "fusion.3", Category: "loop fusion", Flops: 50_000, Bytes: 300_000}, DurationPs: 10_000},
			}},
			{Op: Op{Name: "convolution.4", Category: "convolution", Flops: 9_000_000, ModelFlops: 8_000_000, Bytes: 1_000_000}, DurationPs: 30_000},
			{Op: Op{Name: "all-reduce.5", Category: "all-reduce", Bytes: 500_000}, DurationPs: 20_000},
			{Op: Op{Name: "copy.6", Category: "data formatting", Bytes: 200_000}, DurationPs: 5_000},
		},
		HostEvents: 100, EventStats: true, PeakTeraflops: 459, PeakHBMGBps: 2765,
	}
}

// OpTotals are what one device's profile holds of one op.
type OpTotals struct {
	Category      string
	Occurrences   int64
	TimePs        int64
	SelfTimePs    int64
	Flops         uint64
	ModelFlops    uint64 // model_flops, or flops where the op has none (XProf's rule)
	BytesAccessed uint64
}

// Totals are the figures an analysis of a synthetic profile must find, per
// device (every device has the same).
type Totals struct {
	Bytes        int64 // the file's size
	Events       int64 // every event of every plane, XLA Modules included
	DeviceEvents int64 // events on the device planes' Steps and XLA Ops lines
	Steps        int
	StepPs       int64 // each step's duration
	BusyPs       int64 // per device: time covered by ops within steps
	Flops        uint64
	ModelFlops   uint64
	BytesAcc     uint64
	Ops          map[string]*OpTotals
}

// patternSpan is how long one run of the pattern lasts.
func (s *Synthetic) patternSpan() int64 {
	var d int64
	for _, op := range s.Pattern {
		d += op.DurationPs
	}
	return d
}

// StepPs is the duration of each step.
func (s *Synthetic) StepPs() int64 {
	return s.LeadPs + int64(s.Repeat)*s.patternSpan() + s.TailPs
}

// StepsFor returns how many steps make the profile about mib MiB.
func (s Synthetic) StepsFor(dir string, mib int) (int, error) {
	probe := s
	probe.Steps = 4
	path := dir + "/probe.xplane.pb"
	t, err := WriteSynthetic(path, probe)
	os.Remove(path)
	if err != nil {
		return 0, err
	}
	return max(1, int(int64(mib)<<20*4/t.Bytes)), nil
}

// WriteSynthetic writes s to path streaming, holding one event at a time,
// and returns the figures it holds. Lengths are written as 5-byte varints
// (valid protobuf: decoders accept padded varints) and filled in once each
// message ends, so no message is ever held whole.
func WriteSynthetic(path string, s Synthetic) (*Totals, error) {
	s.Variants = max(s.Variants, 1)
	s.Devices = max(s.Devices, 1)
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w := &patchWriter{f: f, bw: bufio.NewWriterSize(f, 1<<20)}
	t := &Totals{Steps: s.Steps, StepPs: s.StepPs(), Ops: map[string]*OpTotals{}}
	s.totals(t)

	for d := 0; d < s.Devices; d++ {
		if err := s.writeDevice(w, d, t); err != nil {
			return nil, err
		}
	}
	if s.HostEvents > 0 {
		if err := s.writeHost(w, t); err != nil {
			return nil, err
		}
	}
	w.appendMsg(protowire.AppendTag(nil, 4, protowire.BytesType), []byte("synthetic-host"))
	if err := w.flush(); err != nil {
		return nil, err
	}
	t.Bytes = w.off
	return t, f.Close()
}

// totals works out what each device holds, from s alone.
func (s *Synthetic) totals(t *Totals) {
	runs := int64(s.Steps) * int64(s.Repeat)
	var add func(op SyntheticOp, v int)
	add = func(op SyntheticOp, v int) {
		name := variantName(op.Name, v, s.Variants)
		o := t.Ops[name]
		if o == nil {
			o = &OpTotals{Category: op.Category}
			t.Ops[name] = o
		}
		n := runs / int64(s.Variants)
		if int64(v) < runs%int64(s.Variants) {
			n++
		}
		self := op.DurationPs
		for _, c := range op.Children {
			self -= c.DurationPs
			add(c, v)
		}
		mf := op.ModelFlops
		if mf == 0 {
			mf = op.Flops
		}
		o.Occurrences += n
		o.TimePs += n * op.DurationPs
		o.SelfTimePs += n * self
		o.Flops += uint64(n) * op.Flops
		o.ModelFlops += uint64(n) * mf
		o.BytesAccessed += uint64(n) * op.Bytes
		t.Flops += uint64(n) * op.Flops
		t.ModelFlops += uint64(n) * mf
		t.BytesAcc += uint64(n) * op.Bytes
		t.DeviceEvents += n
	}
	for v := 0; v < min(s.Variants, max(int(runs), 1)); v++ {
		for _, op := range s.Pattern {
			add(op, v)
		}
	}
	t.BusyPs = runs * s.patternSpan()
	t.DeviceEvents += int64(s.Steps)
	// Each device also has an XLA Modules line of one event per step.
	t.Events = int64(s.Devices)*(t.DeviceEvents+int64(s.Steps)) + int64(s.Steps)*int64(s.HostEvents)
	t.DeviceEvents *= int64(s.Devices)
}

func variantName(name string, v, variants int) string {
	if variants <= 1 {
		return name
	}
	return fmt.Sprintf("%s#%d", name, v)
}

func (s *Synthetic) writeDevice(w *patchWriter, d int, t *Totals) error {
	b := NewPlane(int64(d+1), fmt.Sprintf("/device:TPU:%d", d))
	stepID := b.EventID("step")
	groupID := b.StatID(StatGroupID)
	if s.PeakTeraflops > 0 {
		b.Peak(s.PeakTeraflops, s.PeakHBMGBps)
	}
	// Metadata ids of each variant of each pattern op, in depth-first order.
	var ids [][]int64
	for v := 0; v < s.Variants; v++ {
		var vid []int64
		var walk func(op SyntheticOp)
		walk = func(op SyntheticOp) {
			o := op.Op
			o.Name = variantName(op.Name, v, s.Variants)
			vid = append(vid, b.OpID(o))
			for _, c := range op.Children {
				walk(c)
			}
		}
		for _, op := range s.Pattern {
			walk(op)
		}
		ids = append(ids, vid)
	}

	planeAt := w.open(1)
	w.appendProto(&xplanev1.XPlane{Id: b.Plane.Id, Name: b.Plane.Name})
	const ts = 1_700_000_000_000_000_000 // ns: a real epoch, so offsets stay relative to it

	ev := &xplanev1.XEvent{}
	gstat := &xplanev1.XStat{MetadataId: groupID}
	emit := func(id, off, dur int64, group int64) {
		ev.MetadataId, ev.DurationPs = id, dur
		ev.Data = &xplanev1.XEvent_OffsetPs{OffsetPs: off}
		ev.Stats = ev.Stats[:0]
		if s.EventStats {
			gstat.Value = &xplanev1.XStat_Int64Value{Int64Value: group}
			ev.Stats = append(ev.Stats, gstat)
		}
		w.appendField(4, ev)
	}

	// The Steps line.
	lineAt := w.open(3)
	w.appendProto(&xplanev1.XLine{Id: 1, DisplayId: 1, Name: "Steps", TimestampNs: ts})
	for k := 0; k < s.Steps; k++ {
		emit(stepID, int64(k)*t.StepPs, t.StepPs, int64(k))
	}
	if err := w.close(lineAt); err != nil {
		return err
	}
	// The XLA Modules line: one module per step, which the analysis ignores.
	modID := b.EventID("jit_train_step(1)")
	lineAt = w.open(3)
	w.appendProto(&xplanev1.XLine{Id: 2, DisplayId: 2, Name: "XLA Modules", TimestampNs: ts})
	for k := 0; k < s.Steps; k++ {
		emit(modID, int64(k)*t.StepPs+s.LeadPs, int64(s.Repeat)*s.patternSpan(), int64(k))
	}
	if err := w.close(lineAt); err != nil {
		return err
	}
	// The XLA Ops line.
	lineAt = w.open(3)
	w.appendProto(&xplanev1.XLine{Id: 3, DisplayId: 3, Name: "XLA Ops", TimestampNs: ts})
	run := 0
	for k := 0; k < s.Steps; k++ {
		off := int64(k)*t.StepPs + s.LeadPs
		for r := 0; r < s.Repeat; r++ {
			vid := ids[run%s.Variants]
			run++
			i := 0
			var walk func(op SyntheticOp, start int64)
			walk = func(op SyntheticOp, start int64) {
				emit(vid[i], start, op.DurationPs, int64(k))
				i++
				for _, c := range op.Children {
					walk(c, start)
					start += c.DurationPs
				}
			}
			for _, op := range s.Pattern {
				walk(op, off)
				off += op.DurationPs
			}
		}
		if w.err != nil {
			return w.err
		}
	}
	if err := w.close(lineAt); err != nil {
		return err
	}
	// XProf writes the metadata after the lines.
	b.Plane.Lines = nil
	w.appendProto(&xplanev1.XPlane{EventMetadata: b.Plane.EventMetadata, StatMetadata: b.Plane.StatMetadata, Stats: b.Plane.Stats})
	return w.close(planeAt)
}

func (s *Synthetic) writeHost(w *patchWriter, t *Totals) error {
	b := NewPlane(1000, "/host:CPU")
	names := []int64{b.EventID("PjitFunction(train_step)"), b.EventID("ExecuteHelper"), b.EventID("ThunkExecutor::Execute")}
	planeAt := w.open(1)
	w.appendProto(&xplanev1.XPlane{Id: b.Plane.Id, Name: b.Plane.Name})
	lineAt := w.open(3)
	w.appendProto(&xplanev1.XLine{Id: 1, Name: "python3", TimestampNs: 1_700_000_000_000_000_000})
	ev := &xplanev1.XEvent{}
	for k := 0; k < s.Steps; k++ {
		for i := 0; i < s.HostEvents; i++ {
			ev.MetadataId = names[i%len(names)]
			ev.Data = &xplanev1.XEvent_OffsetPs{OffsetPs: int64(k)*t.StepPs + int64(i)*1000}
			ev.DurationPs = 900
			w.appendField(4, ev)
		}
	}
	if err := w.close(lineAt); err != nil {
		return err
	}
	w.appendProto(&xplanev1.XPlane{EventMetadata: b.Plane.EventMetadata, StatMetadata: b.Plane.StatMetadata})
	return w.close(planeAt)
}

// patchWriter writes a file front to back, leaving 5 bytes for each open
// message's length and filling them in when it closes.
type patchWriter struct {
	f   *os.File
	bw  *bufio.Writer
	off int64
	buf []byte
	err error
}

func (w *patchWriter) write(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.bw.Write(b)
	w.off += int64(n)
	w.err = err
}

func (w *patchWriter) appendProto(m proto.Message) {
	var err error
	w.buf, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(w.buf[:0], m)
	if err != nil && w.err == nil {
		w.err = err
	}
	w.write(w.buf)
}

// appendField writes m as field num.
func (w *patchWriter) appendField(num protowire.Number, m proto.Message) {
	var err error
	w.buf = protowire.AppendTag(w.buf[:0], num, protowire.BytesType)
	n := len(w.buf)
	w.buf = protowire.AppendVarint(w.buf, 0) // placeholder, replaced below
	w.buf, err = proto.MarshalOptions{}.MarshalAppend(w.buf, m)
	if err != nil && w.err == nil {
		w.err = err
	}
	size := len(w.buf) - n - 1
	if size < 0x80 {
		w.buf[n] = byte(size)
	} else {
		body := slices.Clone(w.buf[n+1:])
		w.buf = append(protowire.AppendVarint(w.buf[:n], uint64(size)), body...)
	}
	w.write(w.buf)
}

// appendMsg writes a tag and its length-delimited bytes.
func (w *patchWriter) appendMsg(tag, b []byte) {
	w.write(protowire.AppendBytes(tag, b))
}

// open writes field num's tag and 5 placeholder bytes for its length, and
// returns where the length goes.
func (w *patchWriter) open(num protowire.Number) int64 {
	w.write(protowire.AppendTag(nil, num, protowire.BytesType))
	at := w.off
	w.write(make([]byte, 5))
	return at
}

// close fills in the length of the message opened at at.
func (w *patchWriter) close(at int64) error {
	if err := w.flush(); err != nil {
		return err
	}
	n := uint64(w.off - at - 5)
	if n >= 1<<35 {
		return fmt.Errorf("message at byte %d is %d bytes, more than a 5-byte length holds", at, n)
	}
	var b [5]byte
	for i := 0; i < 4; i++ {
		b[i] = byte(n>>(7*i))&0x7f | 0x80
	}
	b[4] = byte(n >> 28)
	_, err := w.f.WriteAt(b[:], at)
	return err
}

func (w *patchWriter) flush() error {
	if w.err != nil {
		return w.err
	}
	return w.bw.Flush()
}
