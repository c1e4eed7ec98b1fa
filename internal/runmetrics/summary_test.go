package runmetrics

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSummarize(t *testing.T) {
	specs := []Spec{{Name: "loss", Better: BetterLower}, {Name: "tflops", Better: BetterHigher}, {Name: "both", Better: BetterHigher}}
	tests := []struct {
		name   string
		points []Point
		want   Report
	}{
		{name: "no points", want: Report{Metrics: []Summary{}}},
		{name: "odd count: the middle value", points: []Point{
			logPt("loss", 0, 3), logPt("loss", 1, 1), logPt("loss", 2, 2),
		}, want: Report{Metrics: []Summary{
			{Name: "loss", Count: 3, First: 3, Last: 2, Min: 1, Max: 3, Mean: 2, Median: 2, Better: BetterLower, Source: SourceLog},
		}}},
		{name: "even count: the mean of the middle two", points: []Point{
			filePt("loss", 0, 4), filePt("loss", 1, 1), filePt("loss", 2, 10), filePt("loss", 3, 2),
		}, want: Report{Metrics: []Summary{
			{Name: "loss", Count: 4, First: 4, Last: 2, Min: 1, Max: 10, Mean: 4.25, Median: 3, Better: BetterLower, Source: SourceFile},
		}}},
		{name: "first and last by step, not by order", points: []Point{
			filePt("tflops", 30, 300), filePt("tflops", 10, 100), filePt("tflops", 20, 200),
		}, want: Report{Metrics: []Summary{
			{Name: "tflops", Count: 3, First: 100, Last: 300, Min: 100, Max: 300, Mean: 200, Median: 200, Better: BetterHigher, Source: SourceFile},
		}}},
		{name: "ties of step keep the given order", points: []Point{
			filePt("x", 1, 7), filePt("x", 0, 5), filePt("x", 1, 8), filePt("x", 0, 6),
		}, want: Report{Metrics: []Summary{
			{Name: "x", Count: 4, First: 5, Last: 8, Min: 5, Max: 8, Mean: 6.5, Median: 6.5, Source: SourceFile},
		}}},
		{name: "conflict: the file's points kept, listed", points: []Point{
			logPt("both", 0, 1000), filePt("both", 0, 1), logPt("both", 1, 2000), filePt("both", 1, 3),
			logPt("loss", 0, 0.5), filePt("acc", 0, 0.9),
		}, want: Report{Metrics: []Summary{
			{Name: "acc", Count: 1, First: 0.9, Last: 0.9, Min: 0.9, Max: 0.9, Mean: 0.9, Median: 0.9, Source: SourceFile},
			{Name: "both", Count: 2, First: 1, Last: 3, Min: 1, Max: 3, Mean: 2, Median: 2, Better: BetterHigher, Source: SourceFile},
			{Name: "loss", Count: 1, First: 0.5, Last: 0.5, Min: 0.5, Max: 0.5, Mean: 0.5, Median: 0.5, Better: BetterLower, Source: SourceLog},
		}, Conflicts: []string{"both"}}},
		{name: "huge values: mean and median stay finite", points: []Point{
			filePt("big", 0, math.MaxFloat64), filePt("big", 1, math.MaxFloat64),
		}, want: Report{Metrics: []Summary{
			{Name: "big", Count: 2, First: math.MaxFloat64, Last: math.MaxFloat64, Min: math.MaxFloat64, Max: math.MaxFloat64,
				Mean: math.MaxFloat64, Median: math.MaxFloat64, Source: SourceFile},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]Point(nil), tt.points...)
			got := Summarize(tt.points, specs)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Summarize (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(in, tt.points); diff != "" {
				t.Errorf("Summarize changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	in := []Point{logPt("a", 0, 1), filePt("b", 0, 2), logPt("b", 0, 3), logPt("c", 0, 4), filePt("a", 5, 5)}
	kept, conflicts := Resolve(in)
	if diff := cmp.Diff([]Point{filePt("b", 0, 2), logPt("c", 0, 4), filePt("a", 5, 5)}, kept); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b"}, conflicts); diff != "" {
		t.Errorf("conflicts (-want +got):\n%s", diff)
	}
}

// TestSummarizeFromExtraction checks the whole path a caller takes: what
// the Extractor emits summarizes as expected.
func TestSummarizeFromExtraction(t *testing.T) {
	p := mustCompile(t, testSpecs)
	e := NewExtractor(p, Cursor{})
	var pts []Point
	pts = e.FeedFile(pts, []byte(`{"step": 0, "step_time": 0.5}`))
	pts = e.FeedFile(pts, []byte(`{"step": 1, "step_time": 0.3}`))
	pts = e.FeedLog(pts, []byte(`step_time: 9`))
	pts = e.FeedLog(pts, []byte(`step 4 loss=2`))
	got := Summarize(pts, p.Specs())
	want := Report{Metrics: []Summary{
		{Name: "loss", Count: 1, First: 2, Last: 2, Min: 2, Max: 2, Mean: 2, Median: 2, Source: SourceLog},
		{Name: "step_time", Count: 2, First: 0.5, Last: 0.3, Min: 0.3, Max: 0.5, Mean: 0.4, Median: 0.4, Better: BetterLower, Source: SourceFile},
	}, Conflicts: []string{"step_time"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Summarize (-want +got):\n%s", diff)
	}
}
