package web

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// A chart is a line chart drawn on the server as SVG: one line per
// experiment, step on x. A metric of 10^5 steps is reduced to the lowest
// and highest value of each pixel column (decimate), which keeps every
// spike visible at a few kilobytes per line; the browser is sent the SVG
// and, for the hover readout, the same reduced points.
type chart struct {
	Title  string
	SVG    template.HTML
	Data   template.JS // JSON for ui.js's readout: {"lines": [{"label", "points": [[step, value]...]}]}
	Legend []legendEntry
	Empty  bool // no line has a finite point
}

type legendEntry struct {
	Label string
	Class string // the line's colour class, s0...
	Count int    // points reported
}

type chartLine struct {
	Label  string
	Colour int // the same experiment keeps its colour on every chart
	Points []*falconv1.MetricPoint
}

// The chart's geometry, in SVG user units; CSS scales it to its box.
const (
	chartW, chartH = 720, 240
	padL, padR     = 64, 14
	padT, padB     = 12, 30
	plotW          = chartW - padL - padR
	plotH          = chartH - padT - padB
	// colours is how many line classes ui.css defines.
	colours = 6
)

type point struct{ x, y float64 }

func newChart(title string, lines []chartLine) chart {
	c := chart{Title: title}
	xs := span{math.Inf(1), math.Inf(-1)}
	ys := span{math.Inf(1), math.Inf(-1)}
	for _, l := range lines {
		for _, p := range l.Points {
			if v := p.GetValue(); finite(v) {
				xs.add(float64(p.GetStep()))
				ys.add(v)
			}
		}
	}
	for _, l := range lines {
		c.Legend = append(c.Legend, legendEntry{Label: l.Label, Class: "s" + strconv.Itoa(l.Colour%colours), Count: len(l.Points)})
	}
	if xs.lo > xs.hi {
		c.Empty = true
		return c
	}
	xs = xs.padded(0)
	ys = ys.padded(0.05)
	xt, yt := ticks(xs, 6), ticks(ys, 5)

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s" data-x0="%g" data-x1="%g" data-px0="%d" data-px1="%d">`,
		chartW, chartH, template.HTMLEscapeString(title), xs.lo, xs.hi, padL, padL+plotW)
	fmt.Fprintf(&b, `<rect class="plot" x="%d" y="%d" width="%d" height="%d"/>`, padL, padT, plotW, plotH)
	for _, t := range yt {
		y := ys.scale(t, padT+plotH, padT)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/><text class="tick" x="%d" y="%.1f" text-anchor="end" dy="0.32em">%s</text>`,
			padL, padL+plotW, y, y, padL-6, y, label(t))
	}
	for _, t := range xt {
		x := xs.scale(t, padL, padL+plotW)
		fmt.Fprintf(&b, `<line class="grid" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/><text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>`,
			x, x, padT, padT+plotH, x, padT+plotH+18, label(t))
	}
	type readout struct {
		Label  string       `json:"label"`
		Points [][2]float64 `json:"points"`
	}
	var data struct {
		Lines []readout `json:"lines"`
	}
	for _, l := range lines {
		kept := decimate(byStep(l.Points), xs, plotW)
		ro := readout{Label: l.Label, Points: make([][2]float64, 0, len(kept))}
		var d strings.Builder
		pen := "M"
		for _, p := range kept {
			if !finite(p.y) {
				pen = "M" // a gap, not a line through it
				continue
			}
			fmt.Fprintf(&d, "%s%.1f %.1f", pen, xs.scale(p.x, padL, padL+plotW), ys.scale(p.y, padT+plotH, padT))
			pen = "L"
			ro.Points = append(ro.Points, [2]float64{p.x, sig6(p.y)})
		}
		fmt.Fprintf(&b, `<path class="line s%d" d="%s"><title>%s</title></path>`, l.Colour%colours, d.String(), template.HTMLEscapeString(l.Label))
		data.Lines = append(data.Lines, ro)
	}
	fmt.Fprintf(&b, `<line class="cursor" x1="0" x2="0" y1="%d" y2="%d"/>`, padT, padT+plotH)
	b.WriteString(`</svg>`)
	c.SVG = template.HTML(b.String()) // built from numbers and escaped labels only
	raw, _ := json.Marshal(data)
	c.Data = template.JS(raw) // json.Marshal escapes <, > and &, so it cannot close the script
	return c
}

// byStep is pts in step order. Points come in the order they were
// reported, and ranks writing one metrics.jsonl interleave theirs.
func byStep(pts []*falconv1.MetricPoint) []*falconv1.MetricPoint {
	if slices.IsSortedFunc(pts, cmpStep) {
		return pts
	}
	out := slices.Clone(pts)
	slices.SortStableFunc(out, cmpStep)
	return out
}

func cmpStep(a, b *falconv1.MetricPoint) int { return cmp.Compare(a.GetStep(), b.GetStep()) }

// decimate keeps, of each pixel column's points, the first, the lowest,
// the highest and the last (in step order), so a line drawn from them
// looks like the full series, peaks included. Non-finite values are kept
// once per column as gaps.
func decimate(pts []*falconv1.MetricPoint, xs span, columns int) []point {
	if len(pts) <= 4*columns {
		out := make([]point, len(pts))
		for i, p := range pts {
			out[i] = point{float64(p.GetStep()), p.GetValue()}
		}
		return out
	}
	out := make([]point, 0, 4*columns)
	col := -1
	var first, lo, hi, last int // indices into pts of the current column
	gap := -1                   // a non-finite point of the column
	flush := func() {
		if col < 0 {
			return
		}
		idx := []int{first, lo, hi, last}
		// In step order, without repeats.
		for i := 1; i < len(idx); i++ {
			for j := i; j > 0 && idx[j] < idx[j-1]; j-- {
				idx[j], idx[j-1] = idx[j-1], idx[j]
			}
		}
		prev := -1
		for _, k := range idx {
			if k != prev && k >= 0 {
				out = append(out, point{float64(pts[k].GetStep()), pts[k].GetValue()})
			}
			prev = k
		}
		if gap >= 0 {
			out = append(out, point{float64(pts[gap].GetStep()), math.NaN()})
		}
	}
	for i, p := range pts {
		c := int(xs.scale(float64(p.GetStep()), 0, columns))
		if c != col {
			flush()
			col, first, lo, hi, last, gap = c, -1, -1, -1, -1, -1
		}
		v := p.GetValue()
		if !finite(v) {
			gap = i
			continue
		}
		if first < 0 {
			first = i
		}
		if lo < 0 || v < pts[lo].GetValue() {
			lo = i
		}
		if hi < 0 || v > pts[hi].GetValue() {
			hi = i
		}
		last = i
	}
	flush()
	return out
}

// span is a range of values on one axis.
type span struct{ lo, hi float64 }

func (s *span) add(v float64) { s.lo, s.hi = math.Min(s.lo, v), math.Max(s.hi, v) }

// padded widens s by frac of its width on each side, and a single value
// into a range around it.
func (s span) padded(frac float64) span {
	if s.hi == s.lo {
		d := math.Max(math.Abs(s.lo)*0.05, 1)
		return span{s.lo - d, s.hi + d}
	}
	d := (s.hi - s.lo) * frac
	return span{s.lo - d, s.hi + d}
}

// scale maps v in s onto [a, b].
func (s span) scale(v float64, a, b int) float64 {
	return float64(a) + (v-s.lo)/(s.hi-s.lo)*float64(b-a)
}

// ticks are about n round values (1, 2 or 5 times a power of ten apart)
// inside s.
func ticks(s span, n int) []float64 {
	raw := (s.hi - s.lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	var out []float64
	// Multiples of step, each computed afresh: adding step up would drift.
	for k := math.Ceil(s.lo/step - 1e-9); k*step <= s.hi+step*1e-9; k++ {
		out = append(out, k*step+0) // +0: a tick at -0 would read "-0"
	}
	return out
}

// sig6 rounds v to six significant digits: the readout shows five, and
// JSON of full float64s would be most of a long run's page.
func sig6(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return r
}

// label writes a tick's value in few characters: 1200, 0.25, 3.5e+06.
func label(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
