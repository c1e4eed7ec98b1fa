package runmetrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func filePt(name string, step int64, v float64) Point {
	return Point{Name: name, Step: step, Value: v, Source: SourceFile}
}

func logPt(name string, step int64, v float64) Point {
	return Point{Name: name, Step: step, Value: v, Source: SourceLog}
}

func TestFeedFile(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    []Point
		skipped int64
	}{
		{name: "step and two metrics", line: `{"step": 10, "step_time": 0.41, "tflops": 312.5}`,
			want: []Point{filePt("step_time", 10, 0.41), filePt("tflops", 10, 312.5)}},
		{name: "step after the metrics", line: `{"loss": -1.5e-3, "step": 7}`,
			want: []Point{filePt("loss", 7, -1.5e-3)}},
		{name: "no step: the ordinal of valid lines", line: `{"loss": 2}`,
			want: []Point{filePt("loss", 3, 2)}},
		{name: "step written as a float", line: `{"step": 1e1, "loss": 2}`,
			want: []Point{filePt("loss", 10, 2)}},
		{name: "non-numeric fields ignored", line: `{"s": "1.5", "b": true, "n": null, "o": {"x": 1, "y": "}"}, "a": [1, [2]], "loss": 1}`,
			want: []Point{filePt("loss", 3, 1)}},
		{name: "strings with quotes and braces", line: `{"note": "a \"}\" {", "loss": 4}`,
			want: []Point{filePt("loss", 3, 4)}},
		{name: "escaped key", line: `{"lo\u0073s": 5}`,
			want: []Point{filePt("loss", 3, 5)}},
		{name: "invalid names ignored", line: `{"bad key": 1, "9x": 2, "": 3, "ok": 4}`,
			want: []Point{filePt("ok", 3, 4)}},
		{name: "repeated key: last wins", line: `{"loss": 1, "acc": 2, "loss": 3}`,
			want: []Point{filePt("loss", 3, 3), filePt("acc", 3, 2)}},
		{name: "surrounding space and CR", line: " \t{\"loss\":1}\r",
			want: []Point{filePt("loss", 3, 1)}},
		{name: "empty object: valid, no points", line: `{}`},
		{name: "blank line: neither", line: "  \r"},
		{name: "not JSON", line: `step=1 loss=2`, skipped: 1},
		{name: "truncated JSON", line: `{"loss": 1`, skipped: 1},
		{name: "trailing garbage", line: `{"loss": 1} x`, skipped: 1},
		{name: "array, not object", line: `[1, 2]`, skipped: 1},
		{name: "bare number", line: `12`, skipped: 1},
		{name: "NaN is not JSON", line: `{"loss": NaN}`, skipped: 1},
		{name: "Infinity is not JSON", line: `{"loss": Infinity}`, skipped: 1},
		{name: "overflow to Inf", line: `{"loss": 1e400, "ok": 1}`, skipped: 1},
		{name: "negative step", line: `{"step": -1, "loss": 1}`, skipped: 1},
		{name: "fractional step", line: `{"step": 1.5, "loss": 1}`, skipped: 1},
		{name: "string step", line: `{"step": "1", "loss": 1}`, skipped: 1},
		{name: "null step", line: `{"step": null, "loss": 1}`, skipped: 1},
		{name: "step beyond int64", line: `{"step": 9223372036854775808, "loss": 1}`, skipped: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Three valid lines came before, so an ordinal step is 3.
			e := NewExtractor(nil, Cursor{FileLines: 3})
			sentinel := Point{Name: "kept"}
			got := e.FeedFile([]Point{sentinel}, []byte(tt.line))
			if diff := cmp.Diff(append([]Point{sentinel}, tt.want...), got); diff != "" {
				t.Errorf("points (-want +got):\n%s", diff)
			}
			c := e.Cursor()
			if c.FileSkipped != tt.skipped {
				t.Errorf("FileSkipped = %d, want %d", c.FileSkipped, tt.skipped)
			}
			wantLines := int64(3)
			if tt.skipped == 0 && strings.TrimSpace(tt.line) != "" {
				wantLines = 4
			}
			if c.FileLines != wantLines {
				t.Errorf("FileLines = %d, want %d", c.FileLines, wantLines)
			}
		})
	}
}

func TestFeedFileNameLimit(t *testing.T) {
	e := NewExtractor(nil, Cursor{})
	var pts []Point
	for i := range MaxFileNames + 10 {
		pts = e.FeedFile(pts[:0], fmt.Appendf(nil, `{"m%d": 1, "m0": 2}`, i))
	}
	// The last line's new name is over the limit; m0 is known.
	if diff := cmp.Diff([]Point{filePt("m0", MaxFileNames+9, 2)}, pts); diff != "" {
		t.Errorf("points (-want +got):\n%s", diff)
	}
	c := e.Cursor()
	if len(c.FileNames) != MaxFileNames {
		t.Errorf("len(FileNames) = %d, want %d", len(c.FileNames), MaxFileNames)
	}
	// The limit holds across a resume.
	e = NewExtractor(nil, c)
	if got := e.FeedFile(nil, []byte(`{"fresh": 1, "m5": 2}`)); !cmp.Equal(got, []Point{filePt("m5", MaxFileNames+10, 2)}) {
		t.Errorf("after resume: %v", got)
	}
}

var testSpecs = []Spec{
	{Name: "step_time", Pattern: `step_time: (?P<value>\S+)`, Better: BetterLower},
	{Name: "loss", Pattern: `(?:step (?P<step>\S+) )?loss=(?P<value>\S+)`},
	{Name: "tflops", Pattern: `(?i)TFLOPS (?P<value>[0-9.]+)`, Better: BetterHigher},
}

func mustCompile(t testing.TB, specs []Spec) *Patterns {
	t.Helper()
	p, err := Compile(specs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFeedLog(t *testing.T) {
	p := mustCompile(t, testSpecs)
	tests := []struct {
		name    string
		line    string
		want    []Point
		skipped int64
	}{
		{name: "value", line: "I1203 12:00:00 trainer.py:10] step_time: 0.41",
			want: []Point{logPt("step_time", 5, 0.41)}},
		{name: "value and step", line: "step 120 loss=2.5",
			want: []Point{logPt("loss", 120, 2.5)}},
		{name: "optional step absent: ordinal", line: "loss=2.5",
			want: []Point{logPt("loss", 5, 2.5)}},
		{name: "case-folded pattern", line: "tflops 312.5",
			want: []Point{logPt("tflops", 5, 312.5)}},
		{name: "two metrics on a line", line: "step 3 loss=1 step_time: 0.5\r",
			want: []Point{logPt("step_time", 5, 0.5), logPt("loss", 3, 1)}},
		{name: "only the first match of a pattern", line: "loss=1 loss=2",
			want: []Point{logPt("loss", 5, 1)}},
		{name: "no match: not skipped", line: "epoch 1 done"},
		{name: "literal without a match", line: "step_time:"},
		{name: "value not a number", line: "step_time: fast", skipped: 1},
		{name: "value with two dots", line: "TFLOPS 1.2.3", skipped: 1},
		{name: "NaN value", line: "step_time: NaN", skipped: 1},
		{name: "Inf value", line: "step_time: +Inf", skipped: 1},
		{name: "value overflows", line: "step_time: 1e999", skipped: 1},
		{name: "step not an integer", line: "step 1.5 loss=1", skipped: 1},
		{name: "step negative", line: "step -1 loss=1", skipped: 1},
		{name: "one bad, one good: counted once, point kept", line: "step x loss=1 step_time: nan tflops 2",
			want: []Point{logPt("tflops", 5, 2)}, skipped: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewExtractor(p, Cursor{LogMatches: map[string]int64{"step_time": 5, "loss": 5, "tflops": 5}})
			got := e.FeedLog(nil, []byte(tt.line))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("points (-want +got):\n%s", diff)
			}
			c := e.Cursor()
			if c.LogSkipped != tt.skipped {
				t.Errorf("LogSkipped = %d, want %d", c.LogSkipped, tt.skipped)
			}
			for _, pt := range tt.want {
				if c.LogMatches[pt.Name] != 6 {
					t.Errorf("LogMatches[%s] = %d, want 6", pt.Name, c.LogMatches[pt.Name])
				}
			}
		})
	}
}

func TestFeedLogWithoutPatterns(t *testing.T) {
	e := NewExtractor(nil, Cursor{})
	if got := e.FeedLog(nil, []byte("loss=1")); got != nil {
		t.Errorf("FeedLog without patterns = %v", got)
	}
}

// reader is ReadFile or ReadLog.
type reader func(e *Extractor, r io.Reader, final bool, flush func([]Point) error) error

var (
	readFile reader = (*Extractor).ReadFile
	readLog  reader = (*Extractor).ReadLog
)

// run reads r and returns the points and the cursor after every flush.
func run(t *testing.T, e *Extractor, read reader, r io.Reader, final bool) ([]Point, []Cursor) {
	t.Helper()
	var pts []Point
	var curs []Cursor
	err := read(e, r, final, func(b []Point) error {
		pts = append(pts, b...)
		curs = append(curs, e.Cursor())
		return nil
	})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return pts, curs
}

const fileInput = `{"step": 1, "loss": 3.5, "acc": 0.1}
not json
{"loss": 3.25}

{"step": 5, "loss": 3, "note": "x"}
{"loss": NaN}
{"acc": 0.5}`

const logInput = "boot\nstep_time: 0.5\nstep 10 loss=2 TFLOPS 100\r\nstep_time: bad\nloss=1.5\nstep_time: 0.25"

func TestReadPartialLastLine(t *testing.T) {
	tests := []struct {
		name   string
		read   reader
		input  string
		final  bool
		want   []Point
		cursor Cursor
	}{
		{name: "file, running: last line left", read: readFile, input: fileInput,
			want: []Point{filePt("loss", 1, 3.5), filePt("acc", 1, 0.1), filePt("loss", 1, 3.25), filePt("loss", 5, 3)},
			cursor: Cursor{FileOffset: int64(strings.LastIndexByte(fileInput, '\n') + 1), FileLines: 3, FileSkipped: 2,
				FileNames: []string{"loss", "acc"}}},
		{name: "file, final: last line read", read: readFile, input: fileInput, final: true,
			want:   []Point{filePt("loss", 1, 3.5), filePt("acc", 1, 0.1), filePt("loss", 1, 3.25), filePt("loss", 5, 3), filePt("acc", 3, 0.5)},
			cursor: Cursor{FileOffset: int64(len(fileInput)), FileLines: 4, FileSkipped: 2, FileNames: []string{"loss", "acc"}}},
		{name: "log, running: last line left", read: readLog, input: logInput,
			want: []Point{logPt("step_time", 0, 0.5), logPt("loss", 10, 2), logPt("tflops", 0, 100), logPt("loss", 1, 1.5)},
			cursor: Cursor{LogOffset: int64(strings.LastIndexByte(logInput, '\n') + 1), LogSkipped: 1,
				LogMatches: map[string]int64{"step_time": 1, "loss": 2, "tflops": 1}}},
		{name: "log, final: last line read", read: readLog, input: logInput, final: true,
			want: []Point{logPt("step_time", 0, 0.5), logPt("loss", 10, 2), logPt("tflops", 0, 100), logPt("loss", 1, 1.5), logPt("step_time", 1, 0.25)},
			cursor: Cursor{LogOffset: int64(len(logInput)), LogSkipped: 1,
				LogMatches: map[string]int64{"step_time": 2, "loss": 2, "tflops": 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []struct {
				name string
				r    io.Reader
			}{
				{"whole", strings.NewReader(tt.input)},
				{"one byte a read", iotest.OneByteReader(strings.NewReader(tt.input))},
				{"EOF with data", iotest.DataErrReader(strings.NewReader(tt.input))},
			} {
				e := NewExtractor(mustCompile(t, testSpecs), Cursor{})
				got, curs := run(t, e, tt.read, r.r, tt.final)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s: points (-want +got):\n%s", r.name, diff)
				}
				if diff := cmp.Diff(tt.cursor, curs[len(curs)-1]); diff != "" {
					t.Errorf("%s: cursor (-want +got):\n%s", r.name, diff)
				}
			}
		})
	}
}

// TestResume stops a read at every byte of the input, as a running job's
// growing file looks, persists the cursor as JSON, and continues in a new
// Extractor: the points must be those of one read, none twice.
func TestResume(t *testing.T) {
	for _, src := range []struct {
		name  string
		read  reader
		input string
		off   func(Cursor) int64
	}{
		{"file", readFile, fileInput, func(c Cursor) int64 { return c.FileOffset }},
		{"log", readLog, logInput, func(c Cursor) int64 { return c.LogOffset }},
	} {
		t.Run(src.name, func(t *testing.T) {
			p := mustCompile(t, testSpecs)
			want, _ := run(t, NewExtractor(p, Cursor{}), src.read, strings.NewReader(src.input), true)
			for cut := 0; cut <= len(src.input); cut++ {
				e := NewExtractor(p, Cursor{})
				got, curs := run(t, e, src.read, strings.NewReader(src.input[:cut]), false)
				c := e.Cursor()
				if len(curs) > 0 && !cmp.Equal(curs[len(curs)-1], c) {
					t.Fatalf("cut %d: last flushed cursor %+v differs from Cursor() %+v", cut, curs[len(curs)-1], c)
				}
				persisted, err := json.Marshal(c)
				if err != nil {
					t.Fatal(err)
				}
				var restored Cursor
				if err := json.Unmarshal(persisted, &restored); err != nil {
					t.Fatal(err)
				}
				e = NewExtractor(p, restored)
				more, _ := run(t, e, src.read, strings.NewReader(src.input[src.off(restored):]), true)
				if diff := cmp.Diff(want, append(got, more...)); diff != "" {
					t.Fatalf("cut at %d (cursor %s): points (-want +got):\n%s", cut, persisted, diff)
				}
			}
		})
	}
}

// TestResumeFromAnyBatch crashes after each flush of a long read and
// resumes from that flush's cursor.
func TestResumeFromAnyBatch(t *testing.T) {
	var in bytes.Buffer
	for i := range 3000 {
		fmt.Fprintf(&in, "{\"a\": %d, \"b\": 1}\n", i)
	}
	want, curs := run(t, NewExtractor(nil, Cursor{}), readFile, bytes.NewReader(in.Bytes()), true)
	if len(want) != 6000 || len(curs) < 6 {
		t.Fatalf("got %d points in %d batches; want 6000 in at least 6", len(want), len(curs))
	}
	seen := 0
	for i, c := range curs {
		e := NewExtractor(nil, c)
		more, _ := run(t, e, readFile, bytes.NewReader(in.Bytes()[c.FileOffset:]), true)
		// Points up to this flush plus those after it.
		seen = int(c.FileLines) * 2
		if diff := cmp.Diff(want, append(append([]Point(nil), want[:seen]...), more...)); diff != "" {
			t.Fatalf("resume after batch %d: (-want +got):\n%s", i, diff)
		}
	}
}

func TestReadLongLines(t *testing.T) {
	for _, n := range []int{MaxLineBytes + 10, 3 * MaxLineBytes} {
		t.Run(fmt.Sprintf("%d bytes", n), func(t *testing.T) { testReadLongLines(t, strings.Repeat("x", n)) })
	}
}

// testReadLongLines reads lines longer than MaxLineBytes: one that fits the
// read buffer whole, and one that does not, whose tail is dropped as it is
// read.
func testReadLongLines(t *testing.T, long string) {
	t.Run("file: skipped, offsets kept", func(t *testing.T) {
		in := `{"a": 1}` + "\n" + `{"b": "` + long + `"}` + "\n" + `{"a": 2}` + "\n"
		for _, final := range []bool{false, true} {
			e := NewExtractor(nil, Cursor{})
			got, _ := run(t, e, readFile, iotest.HalfReader(strings.NewReader(in)), final)
			if diff := cmp.Diff([]Point{filePt("a", 0, 1), filePt("a", 1, 2)}, got); diff != "" {
				t.Errorf("points (-want +got):\n%s", diff)
			}
			if c := e.Cursor(); c.FileOffset != int64(len(in)) || c.FileSkipped != 1 {
				t.Errorf("cursor %+v; want offset %d, 1 skipped", c, len(in))
			}
		}
	})
	t.Run("file: unfinished long last line waits", func(t *testing.T) {
		in := `{"a": 1}` + "\n" + long
		e := NewExtractor(nil, Cursor{})
		run(t, e, readFile, strings.NewReader(in), false)
		if c := e.Cursor(); c.FileOffset != 9 || c.FileSkipped != 0 {
			t.Errorf("running: cursor %+v; want offset 9, none skipped", c)
		}
		run(t, e, readFile, strings.NewReader(in[9:]), true)
		if c := e.Cursor(); c.FileOffset != int64(len(in)) || c.FileSkipped != 1 {
			t.Errorf("final: cursor %+v; want offset %d, 1 skipped", c, len(in))
		}
	})
	t.Run("log: matched on its head", func(t *testing.T) {
		in := "loss=3 " + long + "\nloss=4\n"
		e := NewExtractor(mustCompile(t, testSpecs), Cursor{})
		got, _ := run(t, e, readLog, strings.NewReader(in), false)
		if diff := cmp.Diff([]Point{logPt("loss", 0, 3), logPt("loss", 1, 4)}, got); diff != "" {
			t.Errorf("points (-want +got):\n%s", diff)
		}
		if c := e.Cursor(); c.LogOffset != int64(len(in)) {
			t.Errorf("LogOffset = %d, want %d", c.LogOffset, len(in))
		}
	})
}

func TestReadErrors(t *testing.T) {
	boom := errors.New("boom")
	t.Run("reader error after lines: flushed, then returned", func(t *testing.T) {
		e := NewExtractor(nil, Cursor{})
		r := io.MultiReader(strings.NewReader("{\"a\": 1}\n{\"a\""), iotest.ErrReader(boom))
		var got []Point
		err := e.ReadFile(r, true, func(b []Point) error { got = append(got, b...); return nil })
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
		if diff := cmp.Diff([]Point{filePt("a", 0, 1)}, got); diff != "" {
			t.Errorf("points (-want +got):\n%s", diff)
		}
		if c := e.Cursor(); c.FileOffset != 9 {
			t.Errorf("FileOffset = %d, want 9: the unfinished line is not consumed", c.FileOffset)
		}
	})
	t.Run("flush error returned", func(t *testing.T) {
		e := NewExtractor(nil, Cursor{})
		err := e.ReadFile(strings.NewReader("{\"a\": 1}\n"), false, func([]Point) error { return boom })
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
	})
	t.Run("only skipped lines: flushed without points", func(t *testing.T) {
		e := NewExtractor(nil, Cursor{})
		var curs []Cursor
		err := e.ReadFile(strings.NewReader("bad\nbad\n"), false, func(b []Point) error {
			if len(b) != 0 {
				t.Errorf("points %v", b)
			}
			curs = append(curs, e.Cursor())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Cursor{{FileOffset: 8, FileSkipped: 2}}, curs); diff != "" {
			t.Errorf("flushed cursors (-want +got):\n%s", diff)
		}
	})
	t.Run("nothing new: no flush", func(t *testing.T) {
		e := NewExtractor(nil, Cursor{})
		err := e.ReadFile(strings.NewReader("{\"a\""), false, func([]Point) error { t.Error("flush called"); return nil })
		if err != nil {
			t.Fatal(err)
		}
	})
}
