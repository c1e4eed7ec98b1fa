package runmetrics

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"math"
	"strconv"
)

// Source is where a point was read.
type Source string

const (
	SourceFile Source = "file" // $FALCON_ARTIFACT_DIR/metrics.jsonl
	SourceLog  Source = "log"  // rank 0's log, matched by a Spec's pattern
)

// Point is one reported value of one metric.
type Point struct {
	Name   string  `json:"name"`
	Step   int64   `json:"step"`
	Value  float64 `json:"value"`
	Source Source  `json:"source"`
}

// Limits that keep an Extractor's memory bounded whatever a job writes.
const (
	// MaxLineBytes is the longest line read whole. A longer metrics.jsonl
	// line is skipped; of a longer log line only the first MaxLineBytes are
	// matched.
	MaxLineBytes = 1 << 20
	// MaxFileNames is how many distinct metric names metrics.jsonl may
	// introduce; fields with further names are ignored, so a job that
	// writes a fresh key per line cannot grow the cursor or the store
	// without bound.
	MaxFileNames = 256
	// BatchPoints is about how many points ReadFile and ReadLog hand to
	// flush at once: a batch ends at the end of the line that reaches it,
	// so it may hold that line's other points too.
	BatchPoints = 1024
)

// Cursor is how far an Extractor has read each source, and the counters its
// next points depend on. Persist it (as JSON, say) with the points it
// covers and pass it to NewExtractor to continue without repeating or
// renumbering a point.
type Cursor struct {
	// FileOffset and LogOffset are the bytes of each source consumed by
	// ReadFile and ReadLog: always at the start of a line. FeedFile and
	// FeedLog leave them alone, since their caller frames lines itself.
	FileOffset int64 `json:"file_offset"`
	LogOffset  int64 `json:"log_offset"`
	// FileLines is the number of valid metrics.jsonl lines so far: the
	// step of the next line that has no "step" field.
	FileLines int64 `json:"file_lines"`
	// FileNames are the metric names metrics.jsonl has introduced, in
	// order of first appearance; MaxFileNames bounds them.
	FileNames []string `json:"file_names,omitempty"`
	// LogMatches counts each metric's points from the log: the step of its
	// next point whose pattern has no step group, or whose step group did
	// not take part in the match.
	LogMatches map[string]int64 `json:"log_matches,omitempty"`
	// FileSkipped and LogSkipped count lines that were not valid and gave
	// no point (see the package doc for what each source calls invalid).
	FileSkipped int64 `json:"file_skipped"`
	LogSkipped  int64 `json:"log_skipped"`
}

// Skipped is the number of lines skipped in both sources, what
// `falcon exp metrics` shows as skipped_lines.
func (c Cursor) Skipped() int64 { return c.FileSkipped + c.LogSkipped }

func (c Cursor) clone() Cursor {
	c.FileNames = append([]string(nil), c.FileNames...)
	c.LogMatches = maps.Clone(c.LogMatches)
	return c
}

// Extractor turns metrics.jsonl lines and rank-0 log lines into points. It
// keeps no points, only its Cursor and reusable buffers, so its memory does
// not grow with the job's output. An Extractor is not safe for concurrent
// use; the two sources may be read in any interleaving.
type Extractor struct {
	p   *Patterns
	cur Cursor
	// logCount mirrors cur.LogMatches by pattern index, so the hot path
	// does not hash names.
	logCount []int64
	names    map[string]string // interned file names, to reuse one string per name
	buf      []byte
	pending  []Point
}

// NewExtractor returns an Extractor for patterns (nil when the manifest
// declares none: the log then yields nothing) that continues from c; the
// zero Cursor starts at the beginning of both sources.
func NewExtractor(patterns *Patterns, c Cursor) *Extractor {
	e := &Extractor{p: patterns, cur: c.clone(), names: make(map[string]string)}
	if patterns != nil {
		e.logCount = make([]int64, len(patterns.patterns))
		for i, pt := range patterns.patterns {
			e.logCount[i] = c.LogMatches[pt.name]
		}
	}
	for _, n := range c.FileNames {
		e.names[n] = n
	}
	return e
}

// Cursor returns where the Extractor stands. It is a copy; inside a flush
// callback it covers exactly the points flushed so far.
func (e *Extractor) Cursor() Cursor {
	c := e.cur.clone()
	if e.p != nil {
		for i, pt := range e.p.patterns {
			if e.logCount[i] > 0 {
				if c.LogMatches == nil {
					c.LogMatches = make(map[string]int64, len(e.logCount))
				}
				c.LogMatches[pt.name] = e.logCount[i]
			}
		}
	}
	return c
}

// FeedLog matches one rank-0 log line (without its newline) against every
// pattern and appends the points it yields to dst. A line that matches no
// pattern is not counted anywhere: most of a log is not metrics. A line
// where some pattern matches but its value or step does not parse, or the
// value is NaN or infinite, counts once in LogSkipped.
func (e *Extractor) FeedLog(dst []Point, line []byte) []Point {
	if e.p == nil {
		return dst
	}
	line = trimCR(line)
	if len(line) > MaxLineBytes {
		line = line[:MaxLineBytes]
	}
	bad := false
	for i := range e.p.patterns {
		pt := &e.p.patterns[i]
		if !pt.mayMatch(line) {
			continue
		}
		m := pt.re.FindSubmatchIndex(line)
		if m == nil {
			continue
		}
		v, ok := parseValue(line[m[2*pt.value]:m[2*pt.value+1]])
		if !ok {
			bad = true
			continue
		}
		step := e.logCount[i]
		if pt.step >= 0 && m[2*pt.step] >= 0 {
			s, err := strconv.ParseInt(string(line[m[2*pt.step]:m[2*pt.step+1]]), 10, 64)
			if err != nil || s < 0 {
				bad = true
				continue
			}
			step = s
		}
		e.logCount[i]++
		dst = append(dst, Point{Name: pt.name, Step: step, Value: v, Source: SourceLog})
	}
	if bad {
		e.cur.LogSkipped++
	}
	return dst
}

// FeedFile reads one metrics.jsonl line (without its newline) and appends
// its points to dst: one per numeric field other than "step", in the order
// of the line. A blank line is ignored; a line that is not a JSON object,
// whose "step" is not a non-negative integer, or that holds a number JSON
// cannot represent as a finite float64 is skipped whole and counted in
// FileSkipped.
func (e *Extractor) FeedFile(dst []Point, line []byte) []Point {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return dst
	}
	if len(line) > MaxLineBytes {
		e.cur.FileSkipped++
		return dst
	}
	start := len(dst)
	step, hasStep, dst, ok := e.scanObject(dst, line)
	if !ok {
		e.cur.FileSkipped++
		return dst[:start]
	}
	if !hasStep {
		step = e.cur.FileLines
	}
	for i := start; i < len(dst); i++ {
		dst[i].Step = step
	}
	e.cur.FileLines++
	return dst
}

// fileName returns the interned name for a metrics.jsonl key, or "" if the
// key is not a valid name or would exceed MaxFileNames.
func (e *Extractor) fileName(key []byte) string {
	if n, ok := e.names[string(key)]; ok { // no allocation: the compiler sees the lookup
		return n
	}
	if len(e.cur.FileNames) >= MaxFileNames {
		return ""
	}
	n := string(key)
	if !validName(n) || n == StepField {
		return ""
	}
	e.names[n] = n
	e.cur.FileNames = append(e.cur.FileNames, n)
	return n
}

// ReadFile reads metrics.jsonl from r, which must start at
// Cursor().FileOffset, and hands the points to flush in batches of about
// BatchPoints. It consumes only complete lines: a trailing line without its
// newline is left for the next call, unless final is true (the job has
// ended and nothing more will be written), when it is read as a line too.
// Inside flush, Cursor() covers exactly the points flushed so far, so the
// caller can store each batch and its cursor in one transaction. The slice
// passed to flush is reused afterwards. On an error from r or flush,
// discard the Extractor and resume from the last cursor persisted.
func (e *Extractor) ReadFile(r io.Reader, final bool, flush func([]Point) error) error {
	return e.read(r, final, &e.cur.FileOffset, true, flush)
}

// ReadLog is ReadFile for rank 0's log, starting at Cursor().LogOffset. A
// line longer than MaxLineBytes is matched on its first MaxLineBytes.
func (e *Extractor) ReadLog(r io.Reader, final bool, flush func([]Point) error) error {
	return e.read(r, final, &e.cur.LogOffset, false, flush)
}

const readChunk = 64 << 10

func (e *Extractor) read(r io.Reader, final bool, offset *int64, file bool, flush func([]Point) error) error {
	buf := e.buf[:0]
	if cap(buf) < readChunk {
		buf = make([]byte, 0, readChunk)
	}
	pts := e.pending[:0]
	// Between reads, buf holds only the unfinished line, at most
	// MaxLineBytes of it; over counts the bytes of an overlong line that
	// were dropped, so the offset still advances past all of them.
	var over int64
	dirty := false // lines consumed since the last flush
	feed := func(line []byte, n int64, long bool) error {
		switch {
		case !file:
			pts = e.FeedLog(pts, line)
		case long:
			e.cur.FileSkipped++ // not a line FeedFile could accept
		default:
			pts = e.FeedFile(pts, line)
		}
		*offset += n
		dirty = true
		if len(pts) >= BatchPoints {
			dirty = false
			err := flush(pts)
			pts = pts[:0]
			return err
		}
		return nil
	}
	var rerr error
	for rerr == nil {
		if len(buf) == cap(buf) {
			// An unfinished line fills buf: grow it, up to room for a
			// whole MaxLineBytes line and a chunk after it.
			nb := make([]byte, len(buf), min(2*cap(buf), MaxLineBytes+readChunk))
			copy(nb, buf)
			buf = nb
		}
		var n int
		n, rerr = r.Read(buf[len(buf):cap(buf)])
		from := len(buf)
		buf = buf[:len(buf)+n]
		start := 0
		for {
			i := bytes.IndexByte(buf[from:], '\n')
			if i < 0 {
				break
			}
			end := from + i
			long := over > 0 || end-start > MaxLineBytes
			if err := feed(buf[start:min(end, start+MaxLineBytes)], int64(end-start+1)+over, long); err != nil {
				return err
			}
			over = 0
			start, from = end+1, end+1
		}
		rest := copy(buf, buf[start:])
		buf = buf[:rest]
		if len(buf) > MaxLineBytes {
			over += int64(len(buf) - MaxLineBytes)
			buf = buf[:MaxLineBytes]
		}
	}
	if errors.Is(rerr, io.EOF) {
		rerr = nil
		if final && (len(buf) > 0 || over > 0) {
			if err := feed(buf, int64(len(buf))+over, over > 0); err != nil {
				return err
			}
		}
	}
	if dirty {
		// Even without points: the offsets and skipped counts moved.
		if err := flush(pts); err != nil {
			return err
		}
	}
	// Keep the buffers for the next call, but not one grown for a long line.
	if cap(buf) <= 4*readChunk {
		e.buf = buf[:0]
	} else {
		e.buf = nil
	}
	e.pending = pts[:0]
	return rerr
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}

// parseValue parses a metric value; NaN and ±Inf are refused, since they
// cannot be stored in SQL columns or averaged into a summary.
func parseValue(b []byte) (float64, bool) {
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}
