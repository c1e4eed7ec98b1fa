package runmetrics

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

const benchLines = 1_000_000

// cycleReader yields block n times, as a long log made of one repeated
// stretch, without holding the whole log in memory.
type cycleReader struct {
	block []byte
	n     int
	off   int
}

func (r *cycleReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	c := copy(p, r.block[r.off:])
	if r.off += c; r.off == len(r.block) {
		r.off, r.n = 0, r.n-1
	}
	return c, nil
}

// logBlock is 1,000 rank-0 log lines, 1 in 10 a metric line for one of the
// three benchSpecs, the rest framework chatter of similar length.
func logBlock() []byte {
	var b bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&b, "I1203 12:%02d:%02d.%06d 4242 trainer.py:%d] ", i/60%60, i%60, i*997%1000000, 100+i%50)
		switch {
		case i%30 == 0:
			fmt.Fprintf(&b, "step %d step_time: %.4f s\n", i, 0.4+float64(i%7)/100)
		case i%30 == 10:
			fmt.Fprintf(&b, "step %d loss=%.6f lr=3e-4\n", i, 2.5-float64(i)/1000)
		case i%30 == 20:
			fmt.Fprintf(&b, "throughput: %.1f TFLOPS per chip\n", 300+float64(i%13))
		default:
			fmt.Fprintf(&b, "xla compile cache hit for module jit_train_step_%d (fingerprint %08x)\n", i%17, i*2654435761)
		}
	}
	return b.Bytes()
}

var benchSpecs = []Spec{
	{Name: "step_time", Pattern: `step (?P<step>\d+) step_time: (?P<value>[0-9.]+)`, Better: BetterLower},
	{Name: "loss", Pattern: `step (?P<step>\d+) loss=(?P<value>[0-9.eE+-]+)`, Better: BetterLower},
	// No literal prefix, which regexp would search for itself: only the
	// prefilter's " TFLOPS" spares this one the regexp on every line.
	{Name: "tflops", Pattern: `(?P<value>[0-9.]+) TFLOPS`, Better: BetterHigher},
}

// BenchmarkExtractLog reads a 10^6-line log through ReadLog. "literal"
// is the usual case, where each pattern's literal rejects most lines
// before its regexp runs; "case-insensitive" makes every pattern (?i),
// so the literals are found ignoring case; "regexp-only" turns the
// literals off, to show what they save.
func BenchmarkExtractLog(b *testing.B) {
	block := logBlock()
	for _, bc := range []struct {
		name     string
		prefix   string
		noFilter bool
	}{{"literal", "", false}, {"case-insensitive", "(?i)", false}, {"regexp-only", "", true}} {
		b.Run(bc.name, func(b *testing.B) {
			specs := append([]Spec(nil), benchSpecs...)
			for i := range specs {
				specs[i].Pattern = bc.prefix + specs[i].Pattern
			}
			p := mustCompile(b, specs)
			for i := range p.patterns {
				if bc.noFilter {
					p.patterns[i].lit = nil
				} else if len(p.patterns[i].lit) == 0 {
					b.Fatalf("%s has no literal", p.patterns[i].name)
				}
			}
			b.SetBytes(int64(len(block)) * benchLines / 1000)
			b.ReportAllocs()
			var points int
			defer reportLines(b)()
			for b.Loop() {
				points = 0
				e := NewExtractor(p, Cursor{})
				err := e.ReadLog(&cycleReader{block: block, n: benchLines / 1000}, true, func(pts []Point) error {
					points += len(pts)
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			if points != benchLines/10 {
				b.Fatalf("%d points, want %d", points, benchLines/10)
			}
		})
	}
}

// BenchmarkExtractFile reads a 10^6-line metrics.jsonl through ReadFile,
// each line a step and three metrics as a training loop writes them.
func BenchmarkExtractFile(b *testing.B) {
	var block bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&block, `{"step": %d, "step_time": %.4f, "loss": %.6f, "tflops": %.1f, "phase": "train"}`+"\n",
			i, 0.4+float64(i%7)/100, 2.5-float64(i)/1000, 300+float64(i%13))
	}
	b.SetBytes(int64(block.Len()) * benchLines / 1000)
	b.ReportAllocs()
	var points int
	defer reportLines(b)()
	for b.Loop() {
		points = 0
		e := NewExtractor(nil, Cursor{})
		err := e.ReadFile(&cycleReader{block: block.Bytes(), n: benchLines / 1000}, true, func(pts []Point) error {
			points += len(pts)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if points != 3*benchLines {
		b.Fatalf("%d points, want %d", points, 3*benchLines)
	}
}

// reportLines, deferred before the loop, reports lines/s of wall time and
// lines/cpu-s of the process's CPU time (GC included): on a shared machine
// wall time also counts the waits for a core.
func reportLines(b *testing.B) func() {
	start := cpuTime()
	return func() {
		lines := float64(benchLines) * float64(b.N)
		b.ReportMetric(lines/b.Elapsed().Seconds(), "lines/s")
		if cpu := cpuTime() - start; start > 0 && cpu > 0 {
			b.ReportMetric(lines/cpu.Seconds(), "lines/cpu-s")
		}
	}
}
