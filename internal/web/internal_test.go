package web

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// The clusters page orders waiting jobs by the position the scheduler
// writes into their Message; this holds the reader to the writer.
func TestQueuePositionReadsTheSchedulersMessage(t *testing.T) {
	a := queue.Ref{ID: "job-aaaaaaaaaa", Actor: "alice", Name: "train"}
	b := queue.Ref{ID: "job-bbbbbbbbbb", Actor: "bob"}
	for _, p := range []queue.Position{
		{Ref: a, Pos: 1},
		{Ref: a, Pos: 1, Acquiring: &b},
		{Ref: a, Pos: 2, Ahead: []queue.Ref{b}},
		{Ref: a, Pos: 345, Ahead: []queue.Ref{b, b}},
	} {
		msg := p.Message() + "; cluster tpu-east is unreachable: timeout"
		got, ok := queuePosition(msg)
		if !ok || got != p.Pos {
			t.Errorf("queuePosition(%q) = %d, %v; want %d", msg, got, ok, p.Pos)
		}
	}
	for _, msg := range []string{"", "waiting for the resource manager", "queue position #", "queue position #0", "queue position #x"} {
		if n, ok := queuePosition(msg); ok {
			t.Errorf("queuePosition(%q) = %d, want none", msg, n)
		}
	}
}

func TestSortWaitingKeepsEachQueueInPositionOrder(t *testing.T) {
	job := func(id, topo string, pos int) waitingJob {
		return waitingJob{&falconv1.Job{Id: id, TaskSpec: &falconv1.TaskSpec{DeviceType: "v7x", DeviceTopo: topo}}, pos}
	}
	ws := []waitingJob{job("a", "2x2x2", 3), job("b", "2x2x1", 0), job("c", "2x2x2", 1), job("d", "2x2x1", 2), job("e", "2x2x2", 0), job("f", "2x2x2", 2)}
	sortWaiting(ws)
	var got []string
	for _, w := range ws {
		got = append(got, w.GetId())
	}
	if diff := cmp.Diff([]string{"d", "b", "c", "f", "a", "e"}, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestTicksAreRoundAndInside(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    span
		want []float64
	}{
		{"steps", span{0, 1000}, []float64{0, 200, 400, 600, 800, 1000}},
		{"fractions", span{0.381, 0.47}, []float64{0.4, 0.42, 0.44, 0.46}},
		{"across zero", span{-1, 1}, []float64{-1, -0.5, 0, 0.5, 1}},
		{"large", span{1e6, 3.5e6}, []float64{1e6, 1.5e6, 2e6, 2.5e6, 3e6, 3.5e6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ticks(tc.s, 5)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
				t.Errorf("ticks(%v) (-want +got):\n%s", tc.s, diff)
			}
		})
	}
}

func points(n int, f func(i int) float64) []*falconv1.MetricPoint {
	out := make([]*falconv1.MetricPoint, n)
	for i := range out {
		out[i] = &falconv1.MetricPoint{Step: int64(i), Value: f(i)}
	}
	return out
}

func TestDecimateKeepsPeaksAndBoundsPoints(t *testing.T) {
	pts := points(100_000, func(i int) float64 { return float64(i % 10) })
	pts[54_321].Value = 1000 // one spike among 10^5 points
	pts[77_777].Value = -1000
	xs := span{0, 99_999}
	kept := decimate(pts, xs, plotW)
	if len(kept) > 4*(plotW+1) {
		t.Errorf("kept %d points of 10^5 for %d columns; want at most 4 a column", len(kept), plotW)
	}
	var hi, lo float64
	for i, p := range kept {
		hi, lo = math.Max(hi, p.y), math.Min(lo, p.y)
		if i > 0 && p.x < kept[i-1].x {
			t.Fatalf("point %d (step %v) before its predecessor (step %v)", i, p.x, kept[i-1].x)
		}
	}
	if hi != 1000 || lo != -1000 {
		t.Errorf("decimated range [%v, %v]; the spikes at ±1000 were lost", lo, hi)
	}
}

func TestChartSkipsNonFiniteValuesAndSortsSteps(t *testing.T) {
	pts := []*falconv1.MetricPoint{{Step: 3, Value: 3}, {Step: 1, Value: 1}, {Step: 2, Value: math.NaN()}, {Step: 4, Value: math.Inf(1)}, {Step: 5, Value: 5}}
	c := newChart("loss", []chartLine{{Label: "exp-aaaaaaaaaa", Points: pts}})
	if c.Empty {
		t.Fatal("a chart with finite points is empty")
	}
	svg := string(c.SVG)
	if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
		t.Errorf("SVG carries a non-finite coordinate: %s", svg)
	}
	// Steps 1 and 3 are joined by nothing: 2 is a gap, so 3 starts a new
	// segment, and 4 is another gap before 5.
	if n := strings.Count(svg, `d="M`); n != 1 {
		t.Errorf("want one path, got %d", n)
	}
	d := svg[strings.Index(svg, `d="`):]
	d = d[:strings.Index(d[3:], `"`)+3]
	if got := strings.Count(d, "M"); got != 3 {
		t.Errorf("path %s: want 3 segments (1 | 3 | 5), got %d", d, got)
	}
	if !strings.Contains(string(c.Data), `"points":[[1,1],[3,3],[5,5]]`) {
		t.Errorf("readout data %s: want the finite points in step order", c.Data)
	}
	if e := newChart("x", []chartLine{{Label: "a", Points: []*falconv1.MetricPoint{{Step: 1, Value: math.NaN()}}}}); !e.Empty {
		t.Error("a chart of NaN only is not empty")
	}
}

func TestLabelsAreEscapedInTheSVG(t *testing.T) {
	c := newChart(`<b>"x"`, []chartLine{{Label: `</script><i>`, Points: points(3, func(i int) float64 { return float64(i) })}})
	for _, bad := range []string{"<b>", "<i>", "</script>"} {
		if strings.Contains(string(c.SVG), bad) || strings.Contains(string(c.Data), bad) {
			t.Errorf("%q reached the page unescaped", bad)
		}
	}
}
