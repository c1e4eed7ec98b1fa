package xplane

import (
	"context"
	"fmt"
	"io"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/falconhq/falcon/internal/errdefs"
)

// MaxString is the longest string value kept. A longer str_value (or
// name) is stepped over: its Stat has Kind KindStr, an empty Str and its
// Len, so that a stat carrying a whole HLO dump cannot take memory that
// the analysis does not need.
const MaxString = 1 << 20

// maxListed bounds the XSpace's errors, warnings and hostnames kept.
const maxListed = 100

// CorruptError is a file that is not a valid XSpace: truncated, or with
// bytes that cannot be what the format puts there. Offset is where the
// bad bytes start: the tag of a field with the wrong wire type, the length
// that runs past its message, the string that is not UTF-8.
type CorruptError struct {
	File   string
	Offset int64
	// Decompressed reports that Offset counts bytes of the decompressed
	// stream of a gzip file.
	Decompressed bool
	Detail       string
}

func (e *CorruptError) Error() string {
	of := ""
	if e.Decompressed {
		of = " of the decompressed stream"
	}
	return fmt.Sprintf("%s: not a valid XSpace profile at byte %d%s: %s", e.File, e.Offset, of, e.Detail)
}

// Unwrap makes a corrupt file bad input (errdefs.ErrInvalid).
func (e *CorruptError) Unwrap() error { return errdefs.ErrInvalid }

// Kind is which of XStat's values a Stat holds.
type Kind uint8

const (
	KindNone Kind = iota // no value set
	KindDouble
	KindUint64
	KindInt64
	KindStr
	KindBytes // the bytes themselves are not kept: only Len
	KindRef   // Ref is the id of the stat metadata whose name is the value
)

// Stat is one XStat.
type Stat struct {
	MetadataID int64
	Kind       Kind
	Double     float64
	Uint64     uint64
	Int64      int64
	Str        string // KindStr, unless longer than MaxString
	Ref        uint64
	// Len is the length of a bytes value, or of a str_value too long to
	// keep.
	Len int
}

// Int returns an integer stat's value (int64, uint64 or a double
// truncated), and whether it has one.
func (s *Stat) Int() (int64, bool) {
	switch s.Kind {
	case KindInt64:
		return s.Int64, true
	case KindUint64:
		return int64(s.Uint64), true
	case KindDouble:
		return int64(s.Double), true
	}
	return 0, false
}

// Float returns a numeric stat's value as a float64.
func (s *Stat) Float() (float64, bool) {
	switch s.Kind {
	case KindInt64:
		return float64(s.Int64), true
	case KindUint64:
		return float64(s.Uint64), true
	case KindDouble:
		return s.Double, true
	}
	return 0, false
}

// String returns a str_value, or the name a ref_value refers to in p.
func (s *Stat) String(p *Plane) (string, bool) {
	switch s.Kind {
	case KindStr:
		return s.Str, true
	case KindRef:
		if m := p.StatMetadata[int64(s.Ref)]; m != nil {
			return m.Name, true
		}
	}
	return "", false
}

// EventMetadata is an XEventMetadata. Its serialized metadata bytes are
// not kept.
type EventMetadata struct {
	ID          int64
	Name        string
	DisplayName string
	Stats       []Stat
	ChildIDs    []int64
}

// StatMetadata is an XStatMetadata.
type StatMetadata struct {
	ID          int64
	Name        string
	Description string
}

// LineHeader is an XLine without its events.
type LineHeader struct {
	ID          int64
	DisplayID   int64
	Name        string
	DisplayName string
	TimestampNs int64
	DurationPs  int64
	Events      int64 // how many events the line has

	start, end int64 // its bytes in the file
}

// Plane is an XPlane without its lines' events, as Walk hands it to a
// Visitor.
type Plane struct {
	Index         int // among the XSpace's planes
	ID            int64
	Name          string
	Stats         []Stat
	EventMetadata map[int64]*EventMetadata
	StatMetadata  map[int64]*StatMetadata
	Lines         []LineHeader // in file order
}

// StatName returns the name of the stat metadata id, or "".
func (p *Plane) StatName(id int64) string {
	if m := p.StatMetadata[id]; m != nil {
		return m.Name
	}
	return ""
}

// Event is an XEvent. OffsetPs is set unless the event is aggregated
// (NumOccurrences > 0).
type Event struct {
	MetadataID     int64
	OffsetPs       int64
	NumOccurrences int64
	DurationPs     int64
	Stats          []Stat
}

// Visitor receives a walk's planes and the events of the lines it asks
// for. Walk reuses the *Event and its Stats once Event returns.
type Visitor interface {
	// Plane is called for each selected plane once its metadata, stats and
	// line headers are read. It returns the indexes into p.Lines of the
	// lines whose events to visit, in the order to visit them.
	Plane(p *Plane) []int
	Line(p *Plane, l *LineHeader)
	Event(e *Event)
	EndLine()
}

// WalkOptions select what a walk hands to its visitor.
type WalkOptions struct {
	// Planes selects planes by name; nil selects every plane.
	Planes func(name string) bool
	// Skip steps over what the visitor does not read (planes not selected,
	// lines not asked for) by their lengths. By default those are decoded
	// and checked too, so that any corruption of the file is refused, at
	// the cost of reading all of it.
	Skip bool
}

// Summary is what a walk saw.
type Summary struct {
	Bytes         int64    `json:"bytes"`          // the size of the XSpace
	BytesRead     int64    `json:"bytes_read"`     // read from the file (a jump over skipped parts reads nothing)
	Planes        int      `json:"planes"`         // in the file
	PlanesVisited int      `json:"planes_visited"` // handed to the visitor
	Events        int64    `json:"events"`         // decoded
	EventsVisited int64    `json:"events_visited"` // handed to the visitor
	Hostnames     []string `json:"hostnames,omitempty"`
	Errors        []string `json:"errors,omitempty"`   // the profiler's own, as it recorded them
	Warnings      []string `json:"warnings,omitempty"` // likewise
}

// Reader reads an XSpace from random-access bytes.
type Reader struct {
	name         string
	ra           io.ReaderAt
	size         int64
	decompressed bool
}

// NewReader reads the size bytes of ra as an XSpace; name is what errors
// call it (a path or URL).
func NewReader(name string, ra io.ReaderAt, size int64) *Reader {
	return &Reader{name: name, ra: ra, size: size}
}

// Name is the name errors use.
func (r *Reader) Name() string { return r.name }

// Size is the XSpace's size in bytes (decompressed, for a gzip file).
func (r *Reader) Size() int64 { return r.size }

// ctxEvery is how many events pass between checks of the context.
const ctxEvery = 1 << 14

// walker is one walk's state.
type walker struct {
	c    *cursor
	ctx  context.Context
	opts WalkOptions
	v    Visitor
	sum  Summary
	ev   Event
	n    int64 // events since the last context check
}

// Walk reads the XSpace once, plane by plane, holding one plane's metadata
// and one event at a time: memory is bounded by the metadata, not by the
// number of events. Each plane is read in three steps — its id and name,
// then (if selected) its stats, metadata and line headers, then the
// events of the lines the visitor asks for — jumping over the rest. A
// corrupt or truncated file is a *CorruptError naming the file and the
// offset; the visitor may have seen part of it by then, so a caller
// keeps nothing from a walk that failed.
func (r *Reader) Walk(ctx context.Context, opts WalkOptions, v Visitor) (Summary, error) {
	w := &walker{c: newCursor(r.name, r.ra, r.size, r.decompressed), ctx: ctx, opts: opts, v: v}
	w.sum.Bytes = r.size
	err := w.space()
	w.sum.BytesRead = w.c.read
	return w.sum, err
}

func (w *walker) space() error {
	c, end := w.c, w.c.size
	type span struct{ start, end int64 }
	var planes []span
	for c.off() < end {
		at := c.off()
		num, typ, err := c.tag(end, "XSpace")
		if err != nil {
			return err
		}
		switch num {
		case 1:
			if err := c.want(at, typ, protowire.BytesType, "XSpace", "planes"); err != nil {
				return err
			}
			e, err := c.length(end, "XSpace", "planes")
			if err != nil {
				return err
			}
			planes = append(planes, span{c.off(), e})
			c.seek(e)
		case 2, 3, 4:
			field := [...]string{2: "errors", 3: "warnings", 4: "hostnames"}[num]
			if err := c.want(at, typ, protowire.BytesType, "XSpace", field); err != nil {
				return err
			}
			s, _, err := c.str(end, "XSpace", field, MaxString)
			if err != nil {
				return err
			}
			list := [...]*[]string{2: &w.sum.Errors, 3: &w.sum.Warnings, 4: &w.sum.Hostnames}[num]
			if len(*list) < maxListed {
				*list = append(*list, s)
			}
		default:
			if err := c.skip(end, typ, "XSpace"); err != nil {
				return err
			}
		}
	}
	w.sum.Planes = len(planes)
	for i, p := range planes {
		if err := w.plane(i, p.start, p.end); err != nil {
			return err
		}
	}
	return nil
}

// plane reads one XPlane in [start, end).
func (w *walker) plane(index int, start, end int64) error {
	c := w.c
	p := &Plane{Index: index}
	// 1. Its id and name.
	c.seek(start)
	for c.off() < end {
		at := c.off()
		num, typ, err := c.tag(end, "XPlane")
		if err != nil {
			return err
		}
		switch num {
		case 1:
			if err := c.want(at, typ, protowire.VarintType, "XPlane", "id"); err != nil {
				return err
			}
			v, err := c.varint(end, "XPlane")
			if err != nil {
				return err
			}
			p.ID = int64(v)
		case 2:
			if err := c.want(at, typ, protowire.BytesType, "XPlane", "name"); err != nil {
				return err
			}
			if p.Name, _, err = c.str(end, "XPlane", "name", MaxString); err != nil {
				return err
			}
		default:
			if err := c.skip(end, typ, "XPlane"); err != nil {
				return err
			}
		}
	}
	selected := w.opts.Planes == nil || w.opts.Planes(p.Name)
	if !selected && w.opts.Skip {
		return nil
	}
	// 2. Its stats, metadata and line headers.
	p.EventMetadata = map[int64]*EventMetadata{}
	p.StatMetadata = map[int64]*StatMetadata{}
	c.seek(start)
	for c.off() < end {
		at := c.off()
		num, typ, err := c.tag(end, "XPlane")
		if err != nil {
			return err
		}
		switch num {
		case 3:
			if err := c.want(at, typ, protowire.BytesType, "XPlane", "lines"); err != nil {
				return err
			}
			e, err := c.length(end, "XPlane", "lines")
			if err != nil {
				return err
			}
			l, err := w.lineHeader(c.off(), e)
			if err != nil {
				return err
			}
			p.Lines = append(p.Lines, l)
			c.seek(e)
		case 4:
			if err := c.want(at, typ, protowire.BytesType, "XPlane", "event_metadata"); err != nil {
				return err
			}
			if err := w.eventMetadataEntry(p, end); err != nil {
				return err
			}
		case 5:
			if err := c.want(at, typ, protowire.BytesType, "XPlane", "stat_metadata"); err != nil {
				return err
			}
			if err := w.statMetadataEntry(p, end); err != nil {
				return err
			}
		case 6:
			if err := c.want(at, typ, protowire.BytesType, "XPlane", "stats"); err != nil {
				return err
			}
			var s Stat
			if err := w.statField(end, "XPlane", &s); err != nil {
				return err
			}
			p.Stats = append(p.Stats, s)
		default:
			if err := c.skip(end, typ, "XPlane"); err != nil {
				return err
			}
		}
	}
	// 3. The events.
	var order []int
	if selected {
		w.sum.PlanesVisited++
		order = w.v.Plane(p)
	}
	walked := make([]bool, len(p.Lines))
	for _, i := range order {
		if i < 0 || i >= len(p.Lines) || walked[i] {
			continue
		}
		walked[i] = true
		l := &p.Lines[i]
		w.v.Line(p, l)
		if err := w.events(l, true); err != nil {
			return err
		}
		w.v.EndLine()
	}
	if w.opts.Skip {
		return nil
	}
	for i := range p.Lines {
		if !walked[i] {
			if err := w.events(&p.Lines[i], false); err != nil {
				return err
			}
		}
	}
	return nil
}

// lineHeader reads an XLine's fields other than its events, which it
// counts and steps over.
func (w *walker) lineHeader(start, end int64) (LineHeader, error) {
	c := w.c
	l := LineHeader{start: start, end: end}
	for c.off() < end {
		at := c.off()
		num, typ, err := c.tag(end, "XLine")
		if err != nil {
			return l, err
		}
		var field string
		var dst *int64
		switch num {
		case 1:
			field, dst = "id", &l.ID
		case 3:
			field, dst = "timestamp_ns", &l.TimestampNs
		case 9:
			field, dst = "duration_ps", &l.DurationPs
		case 10:
			field, dst = "display_id", &l.DisplayID
		case 2, 11:
			field = "name"
			if num == 11 {
				field = "display_name"
			}
			if err := c.want(at, typ, protowire.BytesType, "XLine", field); err != nil {
				return l, err
			}
			s, _, err := c.str(end, "XLine", field, MaxString)
			if err != nil {
				return l, err
			}
			if num == 2 {
				l.Name = s
			} else {
				l.DisplayName = s
			}
			continue
		case 4:
			if err := c.want(at, typ, protowire.BytesType, "XLine", "events"); err != nil {
				return l, err
			}
			e, err := c.length(end, "XLine", "events")
			if err != nil {
				return l, err
			}
			c.seek(e)
			l.Events++
			continue
		default:
			if err := c.skip(end, typ, "XLine"); err != nil {
				return l, err
			}
			continue
		}
		if err := c.want(at, typ, protowire.VarintType, "XLine", field); err != nil {
			return l, err
		}
		v, err := c.varint(end, "XLine")
		if err != nil {
			return l, err
		}
		*dst = int64(v)
	}
	return l, nil
}

// events decodes the events of l, handing them to the visitor if visit.
func (w *walker) events(l *LineHeader, visit bool) error {
	c := w.c
	end := l.end
	c.seek(l.start)
	for c.off() < end {
		at := c.off()
		num, typ, err := c.tag(end, "XLine")
		if err != nil {
			return err
		}
		if num != 4 {
			// Checked by lineHeader.
			if err := c.skip(end, typ, "XLine"); err != nil {
				return err
			}
			continue
		}
		if err := c.want(at, typ, protowire.BytesType, "XLine", "events"); err != nil {
			return err
		}
		e, err := c.length(end, "XLine", "events")
		if err != nil {
			return err
		}
		if !w.eventFast(e) {
			if err := w.event(e); err != nil {
				return err
			}
		}
		w.sum.Events++
		if visit {
			w.sum.EventsVisited++
			w.v.Event(&w.ev)
		}
		if w.n++; w.n == ctxEvery {
			w.n = 0
			if err := w.ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// eventFast decodes the XEvent ending at end into w.ev from the buffer,
// when all of it is there and it holds only the fields XProf writes; it
// reports false, having consumed nothing, for anything else, which event
// then decodes (and refuses, with the offset) field by field. Most
// events take this path: it is the same decoding without the bounds
// bookkeeping of the cursor.
func (w *walker) eventFast(end int64) bool {
	c := w.c
	n := end - c.off()
	if n > int64(len(c.buf)) {
		return false
	}
	if c.w-c.r < int(n) {
		if c.fill(int(n)) != nil || c.w-c.r < int(n) {
			return false
		}
	}
	b := c.buf[c.r : c.r+int(n)]
	ev := &w.ev
	stats := ev.Stats[:0]
	var meta, off, dur, occ int64
	for len(b) > 0 {
		v, k := uvarint(b)
		if k <= 0 {
			return false
		}
		b = b[k:]
		switch v {
		case 1<<3 | 0, 2<<3 | 0, 3<<3 | 0, 5<<3 | 0:
			x, k := uvarint(b)
			if k <= 0 {
				return false
			}
			b = b[k:]
			switch v >> 3 {
			case 1:
				meta = int64(x)
			case 2:
				off, occ = int64(x), 0
			case 3:
				dur = int64(x)
			case 5:
				occ, off = int64(x), 0
			}
		case 4<<3 | 2:
			l, k := uvarint(b)
			if k <= 0 || l > uint64(len(b)-k) {
				return false
			}
			stats = append(stats, Stat{})
			if !statFast(b[k:k+int(l)], &stats[len(stats)-1]) {
				ev.Stats = stats[:0]
				return false
			}
			b = b[k+int(l):]
		default:
			ev.Stats = stats[:0]
			return false
		}
	}
	*ev = Event{MetadataID: meta, OffsetPs: off, NumOccurrences: occ, DurationPs: dur, Stats: stats}
	c.r += int(n)
	return true
}

// statFast decodes an XStat of eventFast.
func statFast(b []byte, s *Stat) bool {
	*s = Stat{}
	for len(b) > 0 {
		v, k := uvarint(b)
		if k <= 0 {
			return false
		}
		b = b[k:]
		switch v {
		case 1<<3 | 0, 3<<3 | 0, 4<<3 | 0, 7<<3 | 0:
			x, k := uvarint(b)
			if k <= 0 {
				return false
			}
			b = b[k:]
			switch v >> 3 {
			case 1:
				s.MetadataID = int64(x)
			case 3:
				s.setValue(KindUint64)
				s.Uint64 = x
			case 4:
				s.setValue(KindInt64)
				s.Int64 = int64(x)
			case 7:
				s.setValue(KindRef)
				s.Ref = x
			}
		case 2<<3 | 1:
			if len(b) < 8 {
				return false
			}
			x, _ := protowire.ConsumeFixed64(b)
			b = b[8:]
			s.setValue(KindDouble)
			s.Double = float64bits(x)
		case 5<<3 | 2, 6<<3 | 2:
			l, k := uvarint(b)
			if k <= 0 || l > uint64(len(b)-k) || l > MaxString {
				return false
			}
			val := b[k : k+int(l)]
			b = b[k+int(l):]
			if v>>3 == 6 {
				s.setValue(KindBytes)
				s.Len = len(val)
				continue
			}
			if !utf8.Valid(val) {
				return false
			}
			s.setValue(KindStr)
			s.Str = string(val)
		default:
			return false
		}
	}
	return true
}

// uvarint decodes a varint at the start of b, with a fast path for one
// byte; k <= 0 when b does not start with one.
func uvarint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return protowire.ConsumeVarint(b)
}

// event decodes one XEvent ending at end into w.ev.
func (w *walker) event(end int64) error {
	c := w.c
	ev := &w.ev
	stats := ev.Stats[:0]
	*ev = Event{}
	for c.off() < end {
		at := c.off()
		num, typ, err := c.tag(end, "XEvent")
		if err != nil {
			return err
		}
		switch num {
		case 1, 2, 3, 5:
			field := [...]string{1: "metadata_id", 2: "offset_ps", 3: "duration_ps", 5: "num_occurrences"}[num]
			if err := c.want(at, typ, protowire.VarintType, "XEvent", field); err != nil {
				return err
			}
			v, err := c.varint(end, "XEvent")
			if err != nil {
				return err
			}
			switch num {
			case 1:
				ev.MetadataID = int64(v)
			case 2: // one of offset_ps and num_occurrences: the last one wins
				ev.OffsetPs, ev.NumOccurrences = int64(v), 0
			case 3:
				ev.DurationPs = int64(v)
			case 5:
				ev.NumOccurrences, ev.OffsetPs = int64(v), 0
			}
		case 4:
			if err := c.want(at, typ, protowire.BytesType, "XEvent", "stats"); err != nil {
				return err
			}
			stats = append(stats, Stat{})
			if err := w.statField(end, "XEvent", &stats[len(stats)-1]); err != nil {
				return err
			}
		default:
			if err := c.skip(end, typ, "XEvent"); err != nil {
				return err
			}
		}
	}
	ev.Stats = stats
	return nil
}

// statField reads the length of an XStat field of msg, then the XStat.
func (w *walker) statField(parentEnd int64, msg string, s *Stat) error {
	c := w.c
	end, err := c.length(parentEnd, msg, "stats")
	if err != nil {
		return err
	}
	*s = Stat{}
	for c.off() < end {
		at := c.off()
		num, typ, err := c.tag(end, "XStat")
		if err != nil {
			return err
		}
		switch num {
		case 1, 3, 4, 7:
			field := [...]string{1: "metadata_id", 3: "uint64_value", 4: "int64_value", 7: "ref_value"}[num]
			if err := c.want(at, typ, protowire.VarintType, "XStat", field); err != nil {
				return err
			}
			v, err := c.varint(end, "XStat")
			if err != nil {
				return err
			}
			switch num {
			case 1:
				s.MetadataID = int64(v)
			case 3:
				s.setValue(KindUint64)
				s.Uint64 = v
			case 4:
				s.setValue(KindInt64)
				s.Int64 = int64(v)
			case 7:
				s.setValue(KindRef)
				s.Ref = v
			}
		case 2:
			if err := c.want(at, typ, protowire.Fixed64Type, "XStat", "double_value"); err != nil {
				return err
			}
			v, err := c.fixed64(end, "XStat")
			if err != nil {
				return err
			}
			s.setValue(KindDouble)
			s.Double = float64bits(v)
		case 5:
			if err := c.want(at, typ, protowire.BytesType, "XStat", "str_value"); err != nil {
				return err
			}
			str, n, err := c.str(end, "XStat", "str_value", MaxString)
			if err != nil {
				return err
			}
			s.setValue(KindStr)
			s.Str = str
			if str == "" {
				s.Len = n
			}
		case 6:
			if err := c.want(at, typ, protowire.BytesType, "XStat", "bytes_value"); err != nil {
				return err
			}
			e, err := c.length(end, "XStat", "bytes_value")
			if err != nil {
				return err
			}
			s.setValue(KindBytes)
			s.Len = int(e - c.off())
			c.seek(e)
		default:
			if err := c.skip(end, typ, "XStat"); err != nil {
				return err
			}
		}
	}
	return nil
}

// setValue clears the value a oneof held before: the last one wins.
func (s *Stat) setValue(k Kind) {
	*s = Stat{MetadataID: s.MetadataID, Kind: k}
}

// eventMetadataEntry reads one entry of XPlane.event_metadata (a map
// entry: key 1, value 2) into p.
func (w *walker) eventMetadataEntry(p *Plane, parentEnd int64) error {
	c := w.c
	end, err := c.length(parentEnd, "XPlane", "event_metadata")
	if err != nil {
		return err
	}
	var key int64
	m := &EventMetadata{}
	for c.off() < end {
		at := c.off()
		num, typ, err := c.tag(end, "XPlane.event_metadata entry")
		if err != nil {
			return err
		}
		switch num {
		case 1:
			if err := c.want(at, typ, protowire.VarintType, "XPlane.event_metadata entry", "key"); err != nil {
				return err
			}
			v, err := c.varint(end, "XPlane.event_metadata entry")
			if err != nil {
				return err
			}
			key = int64(v)
		case 2:
			if err := c.want(at, typ, protowire.BytesType, "XPlane.event_metadata entry", "value"); err != nil {
				return err
			}
			if m, err = w.eventMetadata(end); err != nil {
				return err
			}
		default:
			if err := c.skip(end, typ, "XPlane.event_metadata entry"); err != nil {
				return err
			}
		}
	}
	p.EventMetadata[key] = m
	return nil
}

func (w *walker) eventMetadata(parentEnd int64) (*EventMetadata, error) {
	c := w.c
	end, err := c.length(parentEnd, "XPlane.event_metadata entry", "value")
	if err != nil {
		return nil, err
	}
	m := &EventMetadata{}
	const msg = "XEventMetadata"
	for c.off() < end {
		at := c.off()
		num, typ, err := c.tag(end, msg)
		if err != nil {
			return nil, err
		}
		switch num {
		case 1:
			if err := c.want(at, typ, protowire.VarintType, msg, "id"); err != nil {
				return nil, err
			}
			v, err := c.varint(end, msg)
			if err != nil {
				return nil, err
			}
			m.ID = int64(v)
		case 2, 4:
			field := "name"
			if num == 4 {
				field = "display_name"
			}
			if err := c.want(at, typ, protowire.BytesType, msg, field); err != nil {
				return nil, err
			}
			s, _, err := c.str(end, msg, field, MaxString)
			if err != nil {
				return nil, err
			}
			if num == 2 {
				m.Name = s
			} else {
				m.DisplayName = s
			}
		case 3:
			if err := c.want(at, typ, protowire.BytesType, msg, "metadata"); err != nil {
				return nil, err
			}
			e, err := c.length(end, msg, "metadata")
			if err != nil {
				return nil, err
			}
			c.seek(e)
		case 5:
			if err := c.want(at, typ, protowire.BytesType, msg, "stats"); err != nil {
				return nil, err
			}
			m.Stats = append(m.Stats, Stat{})
			if err := w.statField(end, msg, &m.Stats[len(m.Stats)-1]); err != nil {
				return nil, err
			}
		case 6:
			switch typ {
			case protowire.VarintType:
				v, err := c.varint(end, msg)
				if err != nil {
					return nil, err
				}
				m.ChildIDs = append(m.ChildIDs, int64(v))
			case protowire.BytesType: // packed
				e, err := c.length(end, msg, "child_id")
				if err != nil {
					return nil, err
				}
				for c.off() < e {
					v, err := c.varint(e, msg+".child_id")
					if err != nil {
						return nil, err
					}
					m.ChildIDs = append(m.ChildIDs, int64(v))
				}
			default:
				return nil, c.want(at, typ, protowire.VarintType, msg, "child_id")
			}
		default:
			if err := c.skip(end, typ, msg); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// statMetadataEntry reads one entry of XPlane.stat_metadata into p.
func (w *walker) statMetadataEntry(p *Plane, parentEnd int64) error {
	c := w.c
	end, err := c.length(parentEnd, "XPlane", "stat_metadata")
	if err != nil {
		return err
	}
	const entry = "XPlane.stat_metadata entry"
	var key int64
	m := &StatMetadata{}
	for c.off() < end {
		at := c.off()
		num, typ, err := c.tag(end, entry)
		if err != nil {
			return err
		}
		switch num {
		case 1:
			if err := c.want(at, typ, protowire.VarintType, entry, "key"); err != nil {
				return err
			}
			v, err := c.varint(end, entry)
			if err != nil {
				return err
			}
			key = int64(v)
		case 2:
			if err := c.want(at, typ, protowire.BytesType, entry, "value"); err != nil {
				return err
			}
			if m, err = w.statMetadata(end); err != nil {
				return err
			}
		default:
			if err := c.skip(end, typ, entry); err != nil {
				return err
			}
		}
	}
	p.StatMetadata[key] = m
	return nil
}

func (w *walker) statMetadata(parentEnd int64) (*StatMetadata, error) {
	c := w.c
	end, err := c.length(parentEnd, "XPlane.stat_metadata entry", "value")
	if err != nil {
		return nil, err
	}
	const msg = "XStatMetadata"
	m := &StatMetadata{}
	for c.off() < end {
		at := c.off()
		num, typ, err := c.tag(end, msg)
		if err != nil {
			return nil, err
		}
		switch num {
		case 1:
			if err := c.want(at, typ, protowire.VarintType, msg, "id"); err != nil {
				return nil, err
			}
			v, err := c.varint(end, msg)
			if err != nil {
				return nil, err
			}
			m.ID = int64(v)
		case 2, 3:
			field := "name"
			if num == 3 {
				field = "description"
			}
			if err := c.want(at, typ, protowire.BytesType, msg, field); err != nil {
				return nil, err
			}
			s, _, err := c.str(end, msg, field, MaxString)
			if err != nil {
				return nil, err
			}
			if num == 2 {
				m.Name = s
			} else {
				m.Description = s
			}
		default:
			if err := c.skip(end, typ, msg); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
