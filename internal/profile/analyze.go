package profile

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/xplane"
)

// Names of XProf's xplane_schema (xla/tsl/profiler/utils/xplane_schema).
const (
	LineSteps      = "Steps"
	LineXLAModules = "XLA Modules"
	LineXLAOps     = "XLA Ops"

	StatFlops          = "flops"
	StatModelFlops     = "model_flops"
	StatBytesAccessed  = "bytes_accessed"
	StatHloCategory    = "hlo_category"
	StatSelfDurationPs = "self_duration_ps"
	StatPeakTeraflops  = "peak_teraflops_per_second"
	StatPeakHBMGBps    = "peak_hbm_bw_gigabytes_per_second"
)

// devicePlane matches a TensorCore's or a GPU's plane; SparseCore planes
// ("/device:TPU:0 SparseCore 1") and chip-level "#Chip" planes are not
// devices of their own.
var devicePlane = regexp.MustCompile(`^/device:(TPU|GPU):[0-9]+$`)

// DefaultDeviceOps is how many ops each Device lists when Options leave it.
const DefaultDeviceOps = 20

// Options tune an analysis.
type Options struct {
	// DeviceType is the experiment's device_type (v5p, nvidia-h100-80gb, ...):
	// its accelerator table row gives the peaks a profile does not carry.
	DeviceType string
	// PeakFLOPS and PeakHBMBytesPerSecond, per device, override both the
	// profile and the table.
	PeakFLOPS             float64
	PeakHBMBytesPerSecond float64
	// DeviceOps is how many ops each Device lists (0: DefaultDeviceOps;
	// negative: all). The Summary lists all unless MaxOps is positive.
	DeviceOps int
	MaxOps    int
	// Skip leaves the planes and lines the analysis does not read
	// unchecked (xplane.WalkOptions.Skip): faster, but a corruption there
	// goes unnoticed.
	Skip bool
}

// AnalyzeFile analyses the XSpace file at path (.xplane.pb, or gzip'd).
func AnalyzeFile(ctx context.Context, path string, opts Options) (*Report, error) {
	f, err := xplane.Open(path, xplane.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Analyze(ctx, f.Reader, opts)
}

// Analyze analyses the XSpace r reads, in one walk, holding per device
// its op aggregates, step intervals and nesting stack: memory grows with
// the number of distinct ops and steps, never with the number of events.
// A file that fails to decode yields no report.
func Analyze(ctx context.Context, r *xplane.Reader, opts Options) (*Report, error) {
	var table *accelerator.Spec
	if opts.DeviceType != "" {
		s, err := accelerator.Lookup(opts.DeviceType)
		if err != nil {
			return nil, err
		}
		table = &s
	}
	a := &analysis{opts: opts, table: table}
	var planes []string
	sum, err := r.Walk(ctx, xplane.WalkOptions{
		Planes: func(name string) bool {
			planes = append(planes, name)
			return devicePlane.MatchString(name)
		},
		Skip: opts.Skip,
	}, a)
	if err != nil {
		return nil, err
	}
	if len(a.devices) == 0 {
		return nil, &NoDevicesError{File: r.Name(), Planes: planes}
	}
	a.cur.release()
	rep := &Report{File: r.Name(), Bytes: sum.Bytes, Events: sum.Events, Hostnames: sum.Hostnames}
	deviceOps := opts.DeviceOps
	if deviceOps == 0 {
		deviceOps = DefaultDeviceOps
	}
	full := make([]Figures, len(a.devices))
	for i, d := range a.devices {
		full[i] = d.figures()
		dev := Device{Plane: d.plane, Kind: d.kind, Figures: full[i]}
		if deviceOps >= 0 && len(dev.Ops) > deviceOps {
			dev.Ops = dev.Ops[:deviceOps:deviceOps]
		}
		rep.Devices = append(rep.Devices, dev)
		rep.Warnings = append(rep.Warnings, d.warnings...)
	}
	rep.Summary = summarize(a.devices, full, opts.MaxOps)
	return rep, nil
}

// analysis is the xplane.Visitor of one walk.
type analysis struct {
	opts    Options
	table   *accelerator.Spec
	devices []*device
	cur     *device
	line    int // lineSteps or lineOps, for the line being walked
}

const (
	lineSteps = iota
	lineOps
)

var _ xplane.Visitor = (*analysis)(nil)

// span is a step's interval, in picoseconds from the device's base time.
type span struct {
	start, end int64
	name       string
}

// opAgg is an op's running totals.
type opAgg struct {
	Op
}

// opInfo is what an event metadata id says about its op: the totals it
// adds to and its cost per occurrence.
type opInfo struct {
	agg                     *opAgg
	flops, modelFlops, byts uint64
}

// frame is an op event on the nesting stack, waiting for its children.
type frame struct {
	start, end, dur, children int64
	info                      *opInfo
	counted                   bool
}

// device is one device plane's analysis.
type device struct {
	plane, kind string
	p           *xplane.Plane
	peak        Peak
	warnings    []string

	baseNs   int64 // timestamp_ns all times count from
	lineBase int64 // the current line's start, in ps from baseNs

	// Stat metadata ids of the names the analysis reads (0: absent).
	flopsID, modelFlopsID, bytesID, categoryID, selfID int64

	steps     []span
	stepsDone bool
	opLines   int

	infos    []*opInfo // by metadata id, when ids are small
	infoMap  map[int64]*opInfo
	byName   map[string]*opAgg
	stack    []frame
	si       int   // index of the first step that ends after the last op start
	covered  int64 // coverage union so far (ps)
	last     int64 // start of the last op event, to notice disorder
	disorder int64 // op events that started before the one before them

	busy, self               int64
	flops, modelFlops, byts  uint64
	firstStart, lastEnd      int64
	anyOp                    bool
	outsideEvents, outsidePs int64
	aggregated               int64 // events without a timestamp
	seenSteps                bool
}

// Plane starts a device: it finds the stat ids and the peaks, and asks for
// the Steps lines and then the XLA Ops lines.
func (a *analysis) Plane(p *xplane.Plane) []int {
	if a.cur != nil {
		a.cur.release()
	}
	d := &device{plane: p.Name, p: p, byName: map[string]*opAgg{}, infoMap: map[int64]*opInfo{}}
	d.kind = "tpu"
	if strings.HasPrefix(p.Name, "/device:GPU:") {
		d.kind = "gpu"
	}
	for id, m := range p.StatMetadata {
		switch m.Name {
		case StatFlops:
			d.flopsID = id
		case StatModelFlops:
			d.modelFlopsID = id
		case StatBytesAccessed:
			d.bytesID = id
		case StatHloCategory:
			d.categoryID = id
		case StatSelfDurationPs:
			d.selfID = id
		}
	}
	a.peak(d)
	if maxID := maxKey(p.EventMetadata); maxID >= 0 && maxID < 4*int64(len(p.EventMetadata))+1024 {
		d.infos = make([]*opInfo, maxID+1)
	}

	var steps, ops []int
	var names []string
	d.baseNs = math.MaxInt64
	for i, l := range p.Lines {
		names = append(names, l.Name)
		switch l.Name {
		case LineSteps:
			steps = append(steps, i)
		case LineXLAOps:
			ops = append(ops, i)
		default:
			continue
		}
		if l.Events > 0 {
			d.baseNs = min(d.baseNs, l.TimestampNs)
		}
	}
	if d.baseNs == math.MaxInt64 {
		d.baseNs = 0
	}
	if len(ops) == 0 {
		d.warn("%s has no %q line, so no op figures (its lines: %s)", p.Name, LineXLAOps, strings.Join(names, ", "))
	}
	d.opLines = len(ops)
	if len(ops) > 1 {
		d.warn("%s has %d %q lines; busy time adds up each line's, so ops that overlap across lines count twice (bounded by the window)", p.Name, len(ops), LineXLAOps)
	}
	a.devices = append(a.devices, d)
	a.cur = d
	return append(steps, ops...)
}

// release drops what only the walk of the device's plane needs (its
// metadata), so that devices read before the last hold only their totals.
func (d *device) release() {
	d.p, d.infos, d.infoMap, d.stack = nil, nil, nil, nil
}

func maxKey[V any](m map[int64]V) int64 {
	k := int64(-1)
	for id := range m {
		k = max(k, id)
	}
	return k
}

// peak picks each peak from the options, else the plane's stats, else
// the accelerator table.
func (a *analysis) peak(d *device) {
	var tFLOPS, tBW float64
	var tSource string
	if a.table != nil {
		if string(a.table.Kind) == d.kind {
			tFLOPS, tBW = a.table.DevicePeak()
			tSource = fmt.Sprintf("accelerator table (%s)", a.table.Name)
		} else {
			d.warn("device type %s is not a %s, so its peaks are not used for %s", a.table.Name, strings.ToUpper(d.kind), d.plane)
		}
	}
	var pFLOPS, pBW float64
	for i := range d.p.Stats {
		s := &d.p.Stats[i]
		v, ok := s.Float()
		if !ok || v <= 0 {
			continue
		}
		switch d.p.StatName(s.MetadataID) {
		case StatPeakTeraflops:
			pFLOPS = v * 1e12
		case StatPeakHBMGBps:
			pBW = v * 1e9
		}
	}
	pick := func(opt, prof, tab float64) (float64, string) {
		switch {
		case opt > 0:
			return opt, "options"
		case prof > 0:
			return prof, "profile"
		case tab > 0:
			return tab, tSource
		}
		return 0, ""
	}
	d.peak.FLOPS, d.peak.FLOPSSource = pick(a.opts.PeakFLOPS, pFLOPS, tFLOPS)
	d.peak.HBMBytesPerSecond, d.peak.HBMSource = pick(a.opts.PeakHBMBytesPerSecond, pBW, tBW)
	if d.peak.FLOPS == 0 || d.peak.HBMBytesPerSecond == 0 {
		d.warn("%s: no peak FLOP/s or HBM bandwidth (the profile has none and no known device type was given), so no utilization", d.plane)
	}
}

func (d *device) warn(format string, args ...any) {
	d.warnings = append(d.warnings, fmt.Sprintf(format, args...))
}

// Line starts a Steps or XLA Ops line.
func (a *analysis) Line(p *xplane.Plane, l *xplane.LineHeader) {
	d := a.cur
	d.lineBase = (l.TimestampNs - d.baseNs) * 1000
	if l.Name == LineSteps {
		a.line = lineSteps
		return
	}
	a.line = lineOps
	if !d.stepsDone {
		d.finishSteps()
	}
	d.stack = d.stack[:0]
	d.si, d.covered, d.last = 0, math.MinInt64, math.MinInt64
}

// finishSteps sorts the steps once all Steps lines are read.
func (d *device) finishSteps() {
	d.stepsDone = true
	d.seenSteps = len(d.steps) > 0
	slices.SortStableFunc(d.steps, func(a, b span) int { return cmp.Compare(a.start, b.start) })
}

// Event adds a step or an op event.
func (a *analysis) Event(e *xplane.Event) {
	d := a.cur
	if a.line == lineSteps {
		if e.NumOccurrences > 0 {
			return
		}
		start := d.lineBase + e.OffsetPs
		name := ""
		if m := d.p.EventMetadata[e.MetadataID]; m != nil {
			name = m.Name
		}
		d.steps = append(d.steps, span{start: start, end: start + e.DurationPs, name: name})
		return
	}
	d.op(e)
}

// EndLine closes the ops still open at the end of an XLA Ops line.
func (a *analysis) EndLine() {
	if a.line == lineOps {
		d := a.cur
		for len(d.stack) > 0 {
			d.pop()
		}
	}
}

// info returns what metadata id says about its op, working it out once.
func (d *device) info(id int64) *opInfo {
	if id >= 0 && id < int64(len(d.infos)) {
		if in := d.infos[id]; in != nil {
			return in
		}
	} else if in := d.infoMap[id]; in != nil {
		return in
	}
	in := &opInfo{}
	name, category := fmt.Sprintf("(event metadata %d)", id), ""
	if m := d.p.EventMetadata[id]; m != nil {
		name = m.Name
		if m.DisplayName != "" {
			name = m.DisplayName
		}
		for i := range m.Stats {
			s := &m.Stats[i]
			switch s.MetadataID {
			case 0:
			case d.categoryID:
				category, _ = s.String(d.p)
			case d.flopsID:
				in.flops = uintStat(s)
			case d.modelFlopsID:
				in.modelFlops = uintStat(s)
			case d.bytesID:
				in.byts = uintStat(s)
			}
		}
	}
	agg := d.byName[name]
	if agg == nil {
		agg = &opAgg{Op: Op{Name: name, Category: category}}
		d.byName[name] = agg
	} else if agg.Category == "" {
		agg.Category = category
	}
	in.agg = agg
	if id >= 0 && id < int64(len(d.infos)) {
		d.infos[id] = in
	} else {
		d.infoMap[id] = in
	}
	return in
}

func uintStat(s *xplane.Stat) uint64 {
	v, ok := s.Int()
	if !ok || v < 0 {
		return 0
	}
	return uint64(v)
}

// op adds one XLA Ops event.
func (d *device) op(e *xplane.Event) {
	in := d.info(e.MetadataID)
	flops, modelFlops, byts := in.flops, in.modelFlops, in.byts
	selfOverride := int64(-1)
	for i := range e.Stats { // an event's own stats override its metadata's
		s := &e.Stats[i]
		switch s.MetadataID {
		case 0:
		case d.flopsID:
			flops = uintStat(s)
		case d.modelFlopsID:
			modelFlops = uintStat(s)
		case d.bytesID:
			byts = uintStat(s)
		case d.selfID:
			if v, ok := s.Int(); ok {
				selfOverride = v
			}
		}
	}
	if modelFlops == 0 {
		modelFlops = flops
	}
	occ := int64(1)
	if e.NumOccurrences > 0 {
		// Aggregated: no start, so no nesting and no place in a step.
		occ = e.NumOccurrences
		d.aggregated++
		self := e.DurationPs
		if selfOverride >= 0 {
			self = selfOverride
		}
		d.count(in, occ, e.DurationPs, flops, modelFlops, byts)
		in.agg.SelfTimePs += self
		d.self += self
		return
	}

	start := d.lineBase + e.OffsetPs
	end := start + e.DurationPs
	if start < d.last {
		// Unsorted: start over as if a new sorted run began here, which is
		// right for sorted runs concatenated out of order.
		d.disorder++
		for len(d.stack) > 0 {
			d.pop()
		}
		d.si = sort.Search(len(d.steps), func(i int) bool { return d.steps[i].end > start })
		d.covered = math.MinInt64
	}
	d.last = start
	for len(d.stack) > 0 {
		top := &d.stack[len(d.stack)-1]
		if top.start <= start && end <= top.end {
			break
		}
		d.pop()
	}
	for d.si < len(d.steps) && d.steps[d.si].end <= start {
		d.si++
	}
	counted := true
	if d.seenSteps {
		counted = d.si < len(d.steps) && d.steps[d.si].start <= start
	}
	if len(d.stack) > 0 {
		d.stack[len(d.stack)-1].children += e.DurationPs
	} else {
		d.cover(start, end)
	}
	if counted {
		d.count(in, occ, e.DurationPs, flops, modelFlops, byts)
		if !d.anyOp {
			d.firstStart, d.anyOp = start, true
		}
		d.firstStart = min(d.firstStart, start)
		d.lastEnd = max(d.lastEnd, end)
	} else {
		d.outsideEvents++
		d.outsidePs += e.DurationPs
	}
	d.stack = append(d.stack, frame{start: start, end: end, dur: e.DurationPs, info: in, counted: counted})
	if selfOverride >= 0 { // the profile says what its self time is
		d.stack[len(d.stack)-1].children = e.DurationPs - selfOverride
	}
}

func (d *device) count(in *opInfo, occ, dur int64, flops, modelFlops, byts uint64) {
	a := in.agg
	a.Occurrences += occ
	a.TimePs += dur
	a.Flops += uint64(occ) * flops
	a.ModelFlops += uint64(occ) * modelFlops
	a.BytesAccessed += uint64(occ) * byts
	d.flops += uint64(occ) * flops
	d.modelFlops += uint64(occ) * modelFlops
	d.byts += uint64(occ) * byts
}

// pop closes the innermost open op: its self time is its duration less
// its direct children's.
func (d *device) pop() {
	f := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	if !f.counted {
		return
	}
	self := f.dur - f.children
	f.info.agg.SelfTimePs += self
	d.self += self
}

// cover adds the part of [start, end) not covered yet to the busy time,
// clipped to the steps (all of it without steps).
func (d *device) cover(start, end int64) {
	start = max(start, d.covered)
	if end <= start {
		return
	}
	d.covered = end
	if !d.seenSteps {
		d.busy += end - start
		return
	}
	for j := d.si; j < len(d.steps) && d.steps[j].start < end; j++ {
		s := &d.steps[j]
		if lo, hi := max(start, s.start), min(end, s.end); hi > lo {
			d.busy += hi - lo
		}
	}
}

// figures computes a device's figures, listing every op, once its plane
// is read.
func (d *device) figures() Figures {
	if !d.stepsDone {
		d.finishSteps()
	}
	if d.disorder > 0 {
		d.warn("%s: %d op events started before the one before them on their line; XProf writes lines sorted, so nesting and busy time may be off", d.plane, d.disorder)
	}
	if d.aggregated > 0 {
		d.warn("%s: %d aggregated op events have no start: counted in the op totals, not in busy time", d.plane, d.aggregated)
	}
	if d.outsideEvents > 0 {
		d.warn("%s: %d op events (%s) started outside every step and are left out", d.plane, d.outsideEvents, fmtPs(float64(d.outsidePs)))
	}
	f := Figures{Peak: d.peak, Flops: d.flops, ModelFlops: d.modelFlops, BytesAccessed: d.byts,
		BusyPs: d.busy, SelfTimePs: d.self, OutsideWindow: OutsideWindow{Events: d.outsideEvents, TimePs: d.outsidePs}}
	durs := make([]int64, len(d.steps))
	for i, s := range d.steps {
		durs[i] = s.end - s.start
	}
	f.Steps = stepStats(durs)
	f.DeviceSteps = int64(f.Steps.Count)
	switch {
	case d.seenSteps:
		f.Window, f.WindowPs = WindowSteps, f.Steps.TotalPs
	case d.anyOp:
		f.Window, f.WindowPs = WindowOps, d.lastEnd-d.firstStart
	default:
		f.Window = WindowNone
	}
	ops := make([]*opAgg, 0, len(d.byName))
	for _, a := range d.byName {
		if a.Occurrences > 0 {
			ops = append(ops, a)
		}
	}
	sec := float64(f.WindowPs) / 1e12
	f.finish(ops, -1, sec*f.Peak.FLOPS, sec*f.Peak.HBMBytesPerSecond)
	return f
}

// finish derives the window's shares and utilizations and lists the ops
// and categories. flopsCap and bytesCap are what the window could have
// done at peak (0: no peak).
func (f *Figures) finish(ops []*opAgg, listOps int, flopsCap, bytesCap float64) {
	f.BusyPs = min(f.BusyPs, f.WindowPs)
	f.IdlePs = f.WindowPs - f.BusyPs
	f.IdleFraction = ratio(float64(f.IdlePs), float64(f.WindowPs))
	if flopsCap > 0 {
		f.FlopsUtilization = ptr(float64(f.Flops) / flopsCap)
		f.ModelFlopsUtilization = ptr(float64(f.ModelFlops) / flopsCap)
	}
	if bytesCap > 0 {
		f.HBMBandwidthUtilization = ptr(float64(f.BytesAccessed) / bytesCap)
	}
	slices.SortFunc(ops, func(a, b *opAgg) int {
		if c := cmp.Compare(b.SelfTimePs, a.SelfTimePs); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	cats := map[string]*Category{}
	for _, a := range ops {
		a.SelfFraction = ratio(float64(a.SelfTimePs), float64(f.SelfTimePs))
		c := cats[a.Category]
		if c == nil {
			c = &Category{Name: a.Category}
			cats[a.Category] = c
		}
		c.Ops++
		c.Occurrences += a.Occurrences
		c.TimePs += a.TimePs
		c.SelfTimePs += a.SelfTimePs
		c.Flops += a.Flops
		c.BytesAccessed += a.BytesAccessed
	}
	f.Categories = make([]Category, 0, len(cats))
	for _, c := range cats {
		c.SelfFraction = ratio(float64(c.SelfTimePs), float64(f.SelfTimePs))
		f.Categories = append(f.Categories, *c)
	}
	slices.SortFunc(f.Categories, func(a, b Category) int {
		if c := cmp.Compare(b.SelfTimePs, a.SelfTimePs); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	f.OpCount = len(ops)
	if listOps >= 0 && len(ops) > listOps {
		ops = ops[:listOps]
	}
	f.Ops = make([]Op, len(ops))
	for i, a := range ops {
		f.Ops[i] = a.Op
	}
}

// summarize combines the devices: step k is the slowest device's step k
// (matched by step name when every step of every device has a distinct
// one, else by position); everything else adds up.
func summarize(devs []*device, figs []Figures, maxOps int) Figures {
	var f Figures
	byName := map[string]*opAgg{}
	var flopsCap, bytesCap float64
	windows := map[string]bool{}
	flopsSources, hbmSources := map[string]bool{}, map[string]bool{}
	for i, d := range devs {
		df := &figs[i]
		windows[df.Window] = true
		f.DeviceSteps += df.DeviceSteps
		f.WindowPs += df.WindowPs
		f.BusyPs += df.BusyPs
		f.SelfTimePs += df.SelfTimePs
		f.Flops += df.Flops
		f.ModelFlops += df.ModelFlops
		f.BytesAccessed += df.BytesAccessed
		f.OutsideWindow.Events += df.OutsideWindow.Events
		f.OutsideWindow.TimePs += df.OutsideWindow.TimePs
		f.Peak.FLOPS += d.peak.FLOPS
		f.Peak.HBMBytesPerSecond += d.peak.HBMBytesPerSecond
		sec := float64(df.WindowPs) / 1e12
		flopsCap += sec * d.peak.FLOPS
		bytesCap += sec * d.peak.HBMBytesPerSecond
		flopsSources[d.peak.FLOPSSource] = true
		hbmSources[d.peak.HBMSource] = true
		for _, op := range df.Ops {
			a := byName[op.Name]
			if a == nil {
				a = &opAgg{Op: Op{Name: op.Name, Category: op.Category}}
				byName[op.Name] = a
			}
			a.Occurrences += op.Occurrences
			a.TimePs += op.TimePs
			a.SelfTimePs += op.SelfTimePs
			a.Flops += op.Flops
			a.ModelFlops += op.ModelFlops
			a.BytesAccessed += op.BytesAccessed
		}
	}
	// A peak missing on one device makes the sum meaningless.
	if flopsSources[""] {
		f.Peak.FLOPS, flopsCap = 0, 0
	}
	if hbmSources[""] {
		f.Peak.HBMBytesPerSecond, bytesCap = 0, 0
	}
	f.Peak.FLOPSSource, f.Peak.HBMSource = oneOf(flopsSources), oneOf(hbmSources)
	f.Window = oneOf(windows)
	f.Steps = stepStats(slowestSteps(devs))
	ops := make([]*opAgg, 0, len(byName))
	for _, a := range byName {
		ops = append(ops, a)
	}
	list := -1
	if maxOps > 0 {
		list = maxOps
	}
	f.finish(ops, list, flopsCap, bytesCap)
	return f
}

// oneOf returns the one key of a set, or "mixed".
func oneOf(set map[string]bool) string {
	if len(set) == 1 {
		for k := range set {
			return k
		}
	}
	if len(set) == 0 {
		return ""
	}
	return "mixed"
}

// slowestSteps returns, for each step, its longest duration over the
// devices.
func slowestSteps(devs []*device) []int64 {
	named := true
	for _, d := range devs {
		seen := map[string]bool{}
		for _, s := range d.steps {
			if s.name == "" || seen[s.name] {
				named = false
				break
			}
			seen[s.name] = true
		}
	}
	var out []int64
	if named {
		at := map[string]int{}
		for _, d := range devs {
			for _, s := range d.steps {
				i, ok := at[s.name]
				if !ok {
					i = len(out)
					at[s.name] = i
					out = append(out, 0)
				}
				out[i] = max(out[i], s.end-s.start)
			}
		}
		return out
	}
	for _, d := range devs {
		for i, s := range d.steps {
			if i == len(out) {
				out = append(out, 0)
			}
			out[i] = max(out[i], s.end-s.start)
		}
	}
	return out
}

// stepStats summarizes step durations.
func stepStats(durs []int64) StepStats {
	n := len(durs)
	if n == 0 {
		return StepStats{}
	}
	s := slices.Clone(durs)
	slices.Sort(s)
	st := StepStats{Count: n, MinPs: s[0], MaxPs: s[n-1]}
	for _, v := range s {
		st.TotalPs += v
	}
	st.MeanPs = float64(st.TotalPs) / float64(n)
	if n%2 == 1 {
		st.MedianPs = float64(s[n/2])
	} else {
		st.MedianPs = (float64(s[n/2-1]) + float64(s[n/2])) / 2
	}
	st.P90Ps = percentile(s, 0.9)
	return st
}

// percentile of sorted values, interpolating linearly between the closest
// ranks (numpy's default).
func percentile(sorted []int64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	frac := pos - float64(lo)
	return float64(sorted[lo]) + frac*float64(sorted[hi]-sorted[lo])
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func ptr(v float64) *float64 { return &v }
