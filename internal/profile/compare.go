package profile

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// MostRelativeOps is how many ops Diff.MostRelative lists.
const MostRelativeOps = 20

// mostRelativeShare is the share of a run's self time an op needs, in
// either run, to be listed among the largest relative changes: without
// it, ops of a few nanoseconds that doubled would crowd out those that
// matter.
const mostRelativeShare = 0.001

// Diff compares two reports, B against A: positive deltas mean B is
// higher.
type Diff struct {
	A string `json:"a"`
	B string `json:"b"`
	// Basis says what the op and category times are: "per device-step"
	// (self time ÷ the run's DeviceSteps, so runs of different lengths
	// or device counts compare) when both runs have steps, else "total".
	Basis          string `json:"basis"`
	StepTimeMean   *Delta `json:"step_time_mean_ps,omitempty"`
	StepTimeMedian *Delta `json:"step_time_median_ps,omitempty"`
	// Utilizations and the idle share, absent when either run lacks them.
	FlopsUtilization        *Delta `json:"flops_utilization,omitempty"`
	ModelFlopsUtilization   *Delta `json:"model_flops_utilization,omitempty"`
	HBMBandwidthUtilization *Delta `json:"hbm_bandwidth_utilization,omitempty"`
	IdleFraction            *Delta `json:"idle_fraction,omitempty"`
	// Categories, in either run, by the size of the change, largest first.
	Categories []OpDiff `json:"categories"`
	// Ops in both runs, by the size of the change of their self time,
	// largest first.
	Ops []OpDiff `json:"ops"`
	// MostRelative are the ops with the largest relative change of self
	// time, among those in both runs that take at least 0.1% of either
	// run's self time.
	MostRelative []OpDiff `json:"most_relative"`
	// OnlyInA and OnlyInB are the ops one run has and the other has not,
	// by self time, largest first.
	OnlyInA  []Op     `json:"only_in_a"`
	OnlyInB  []Op     `json:"only_in_b"`
	Warnings []string `json:"warnings,omitempty"`
}

// Delta is a figure in both runs. Relative is Delta ÷ A, absent when A is
// 0.
type Delta struct {
	A        float64  `json:"a"`
	B        float64  `json:"b"`
	Delta    float64  `json:"delta"`
	Relative *float64 `json:"relative,omitempty"`
}

// OpDiff is an op's (or a category's) self time in both runs, in
// picoseconds on the Diff's Basis.
type OpDiff struct {
	Name     string   `json:"name"`
	Category string   `json:"category,omitempty"`
	A        float64  `json:"a_ps"`
	B        float64  `json:"b_ps"`
	Delta    float64  `json:"delta_ps"`
	Relative *float64 `json:"relative,omitempty"`
}

func delta(a, b float64) *Delta {
	d := &Delta{A: a, B: b, Delta: b - a}
	if a != 0 {
		d.Relative = ptr((b - a) / a)
	}
	return d
}

func deltaOf(a, b *float64) *Delta {
	if a == nil || b == nil {
		return nil
	}
	return delta(*a, *b)
}

// Compare compares the summaries of two reports (see Report.Summary).
func Compare(a, b *Report) *Diff {
	fa, fb := &a.Summary, &b.Summary
	d := &Diff{A: a.File, B: b.File, Basis: "total"}
	scaleA, scaleB := 1.0, 1.0
	if fa.DeviceSteps > 0 && fb.DeviceSteps > 0 {
		d.Basis = "per device-step"
		scaleA, scaleB = 1/float64(fa.DeviceSteps), 1/float64(fb.DeviceSteps)
		d.StepTimeMean = delta(fa.Steps.MeanPs, fb.Steps.MeanPs)
		d.StepTimeMedian = delta(fa.Steps.MedianPs, fb.Steps.MedianPs)
	} else {
		d.Warnings = append(d.Warnings, "op times are totals: a run has no steps to divide them by, so runs of different lengths do not compare")
	}
	d.FlopsUtilization = deltaOf(fa.FlopsUtilization, fb.FlopsUtilization)
	d.ModelFlopsUtilization = deltaOf(fa.ModelFlopsUtilization, fb.ModelFlopsUtilization)
	d.HBMBandwidthUtilization = deltaOf(fa.HBMBandwidthUtilization, fb.HBMBandwidthUtilization)
	if fa.WindowPs > 0 && fb.WindowPs > 0 {
		d.IdleFraction = delta(fa.IdleFraction, fb.IdleFraction)
	}
	for _, f := range []*Figures{fa, fb} {
		if f.OpCount > len(f.Ops) {
			d.Warnings = append(d.Warnings, fmt.Sprintf("a summary lists %d of its %d ops, so ops only in one run may be missed", len(f.Ops), f.OpCount))
		}
	}

	// Categories.
	cats := map[string]*OpDiff{}
	for _, c := range fa.Categories {
		cats[c.Name] = &OpDiff{Name: c.Name, A: float64(c.SelfTimePs) * scaleA}
	}
	for _, c := range fb.Categories {
		o := cats[c.Name]
		if o == nil {
			o = &OpDiff{Name: c.Name}
			cats[c.Name] = o
		}
		o.B = float64(c.SelfTimePs) * scaleB
	}
	for _, o := range cats {
		d.Categories = append(d.Categories, o.finish())
	}
	byChange(d.Categories)

	// Ops.
	inB := make(map[string]*Op, len(fb.Ops))
	for i := range fb.Ops {
		inB[fb.Ops[i].Name] = &fb.Ops[i]
	}
	inA := make(map[string]bool, len(fa.Ops))
	totalA, totalB := float64(fa.SelfTimePs)*scaleA, float64(fb.SelfTimePs)*scaleB
	for _, op := range fa.Ops {
		inA[op.Name] = true
		ob := inB[op.Name]
		if ob == nil {
			d.OnlyInA = append(d.OnlyInA, op)
			continue
		}
		cat := op.Category
		if cat == "" {
			cat = ob.Category
		}
		o := OpDiff{Name: op.Name, Category: cat, A: float64(op.SelfTimePs) * scaleA, B: float64(ob.SelfTimePs) * scaleB}.finish()
		d.Ops = append(d.Ops, o)
		if o.Relative != nil && (o.A >= mostRelativeShare*totalA || o.B >= mostRelativeShare*totalB) {
			d.MostRelative = append(d.MostRelative, o)
		}
	}
	for _, op := range fb.Ops {
		if !inA[op.Name] {
			d.OnlyInB = append(d.OnlyInB, op)
		}
	}
	byChange(d.Ops)
	slices.SortFunc(d.MostRelative, func(x, y OpDiff) int {
		if c := cmp.Compare(math.Abs(*y.Relative), math.Abs(*x.Relative)); c != 0 {
			return c
		}
		if c := cmp.Compare(math.Abs(y.Delta), math.Abs(x.Delta)); c != 0 {
			return c
		}
		return cmp.Compare(x.Name, y.Name)
	})
	if len(d.MostRelative) > MostRelativeOps {
		d.MostRelative = d.MostRelative[:MostRelativeOps]
	}
	// Summary ops are sorted by self time already; keep that order.
	if d.Ops == nil {
		d.Ops = []OpDiff{}
	}
	return d
}

func (o OpDiff) finish() OpDiff {
	o.Delta = o.B - o.A
	if o.A != 0 {
		o.Relative = ptr(o.Delta / o.A)
	}
	return o
}

// byChange sorts by the size of the change, largest first, then by name.
func byChange(ds []OpDiff) {
	slices.SortFunc(ds, func(x, y OpDiff) int {
		if c := cmp.Compare(math.Abs(y.Delta), math.Abs(x.Delta)); c != 0 {
			return c
		}
		return cmp.Compare(x.Name, y.Name)
	})
}
