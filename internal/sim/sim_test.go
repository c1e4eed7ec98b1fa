package sim

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseTraceRefusesBadLines(t *testing.T) {
	good := `{"t":"2026-01-05T00:00:00Z","user":"ana","accelerator":"v5p","topology":"2x2x4","hosts":4,"duration":"45m"}`
	cases := []struct {
		name, line string
		field      string
	}{
		{"not JSON", `{"t":`, ""},
		{"unknown field", `{"t":"2026-01-05T00:00:00Z","usr":"ana"}`, "usr"},
		{"bad time", strings.Replace(good, "2026-01-05T00:00:00Z", "yesterday", 1), "t"},
		{"no user", strings.Replace(good, `"ana"`, `""`, 1), "user"},
		{"unknown accelerator", strings.Replace(good, "v5p", "v99", 1), "accelerator"},
		{"bad topology", strings.Replace(good, "2x2x4", "2x2", 1), "topology"},
		{"hosts do not match the topology", strings.Replace(good, `"hosts":4`, `"hosts":2`, 1), "hosts"},
		{"hosts wrong type", strings.Replace(good, `"hosts":4`, `"hosts":"4"`, 1), "hosts"},
		{"bad duration", strings.Replace(good, "45m", "soon", 1), "duration"},
		{"bad supply mode", strings.Replace(good, `}`, `,"supply_mode":"spot"}`, 1), "supply_mode"},
		{"out of order", strings.Replace(good, "00:00:00", "-1", 0), "t"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := "# a comment\n" + good + "\n" + tc.line + "\n"
			if tc.name == "out of order" {
				in = strings.Replace(good, "00:00:00", "01:00:00", 1) + "\n\n" + good + "\n"
			}
			_, err := ParseTrace(strings.NewReader(in))
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v, want a *LineError", err)
			}
			if le.Line != 3 || le.Field != tc.field {
				t.Errorf("line %d field %q (%v), want line 3 field %q", le.Line, le.Field, err, tc.field)
			}
		})
	}
}

func TestJain(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{1, 1, 1, 1}, 1},
		{[]float64{1, 0, 0, 0}, 0.25},
		{[]float64{1, 2, 3, 4}, 100.0 / 120}, // (10)² / (4·30)
		{[]float64{0, 0}, 1},
	} {
		if got := Jain(tc.xs); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Jain(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	if got := WorstOverMedian([]time.Duration{1, 2, 4}); got != 2 {
		t.Errorf("WorstOverMedian = %v, want 2", got)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, s := range []string{"spec", "per-job", "linger=15m", "priority", "priority+linger=5m", "cap=4", "priority+cap=8"} {
		if _, err := ParsePolicy(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"fifo", "linger", "linger=-1m", "per-job+linger=5m", "", "cap", "cap=0", "cap=two"} {
		_, err := ParsePolicy(s)
		if err == nil {
			t.Errorf("%q accepted", s)
		} else if s == "fifo" && !strings.Contains(err.Error(), PolicyNames) {
			t.Errorf("%q: %v does not list the valid policies", s, err)
		}
	}
}

func dayTrace(t testing.TB) []Job {
	f, err := os.Open("testdata/day.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := ParseTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestDeterministic(t *testing.T) {
	shapes, _ := ParseShapes("v5p:2x2x1,v5p:2x2x4")
	o := GenOptions{Users: 5, Jobs: 300, Shapes: shapes, Burstiness: 0.5, Start: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), Span: 12 * time.Hour, Seed: 7}
	a, _ := Generate(o)
	b, _ := Generate(o)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("same seed, different traces:\n%s", diff)
	}
	p, _ := ParsePolicy("linger=10m")
	ra, err := Simulate(a, DefaultConfig(a), p, 3)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := Simulate(b, DefaultConfig(b), p, 3)
	if diff := cmp.Diff(ra, rb); diff != "" {
		t.Fatalf("same seed, different results:\n%s", diff)
	}
}

// TestDayTraceSpec: the bundled day under 000's policy creates the pools
// the simulated day's benchmark reports (377 of 500).
func TestDayTraceSpec(t *testing.T) {
	tr := dayTrace(t)
	p, _ := ParsePolicy("spec")
	r, err := Simulate(tr, DefaultConfig(tr), p, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.PoolsCreated != 377 {
		t.Errorf("spec created %d pools, the simulated day 377", r.PoolsCreated)
	}
}

func BenchmarkSimulate(b *testing.B) {
	shapes, _ := ParseShapes("v5p:2x2x1,v5p:2x2x2,v5p:2x2x4")
	for _, n := range []int{1000, 10000, 100000} {
		tr, _ := Generate(GenOptions{Users: 8, Jobs: n, Shapes: shapes, Burstiness: 0.7, Start: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC),
			Span: time.Duration(n/500) * 24 * time.Hour, Seed: 1})
		p, _ := ParsePolicy("spec")
		b.Run(fmt.Sprintf("%d-jobs", n), func(b *testing.B) {
			for range b.N {
				if _, err := Simulate(tr, DefaultConfig(tr), p, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
