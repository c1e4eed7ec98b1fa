package profile

import (
	"fmt"
	"strings"
)

// Markdown renders the report's summary, categories and top ops for a
// review or a report.md; the interface layer renders anything richer.
func (r *Report) Markdown(topOps int) string {
	var b strings.Builder
	f := &r.Summary
	fmt.Fprintf(&b, "# Profile %s\n\n", r.File)
	fmt.Fprintf(&b, "%d device(s), %s, %d events.\n\n", len(r.Devices), fmtBytes(r.Bytes), r.Events)
	b.WriteString("| | |\n|---|---|\n")
	if f.Steps.Count > 0 {
		s := f.Steps
		fmt.Fprintf(&b, "| steps | %d |\n| step time mean / median / p90 | %s / %s / %s |\n| step time min / max | %s / %s |\n",
			s.Count, fmtPs(s.MeanPs), fmtPs(s.MedianPs), fmtPs(s.P90Ps), fmtPs(float64(s.MinPs)), fmtPs(float64(s.MaxPs)))
	}
	fmt.Fprintf(&b, "| FLOPS utilization | %s |\n| model FLOPS utilization | %s |\n| HBM bandwidth utilization | %s |\n",
		fmtShare(f.FlopsUtilization), fmtShare(f.ModelFlopsUtilization), fmtShare(f.HBMBandwidthUtilization))
	fmt.Fprintf(&b, "| device idle | %.1f%% |\n\n", 100*f.IdleFraction)

	if len(f.Categories) > 0 {
		b.WriteString("| category | ops | self time | share |\n|---|---:|---:|---:|\n")
		for _, c := range f.Categories {
			fmt.Fprintf(&b, "| %s | %d | %s | %.1f%% |\n", mdCell(orNone(c.Name)), c.Ops, fmtPs(float64(c.SelfTimePs)), 100*c.SelfFraction)
		}
		b.WriteString("\n")
	}
	if len(f.Ops) > 0 {
		b.WriteString("| op | category | occurrences | self time | share | time |\n|---|---|---:|---:|---:|---:|\n")
		for i, op := range f.Ops {
			if i == topOps {
				break
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %.1f%% | %s |\n", mdCell(op.Name), mdCell(orNone(op.Category)), op.Occurrences,
				fmtPs(float64(op.SelfTimePs)), 100*op.SelfFraction, fmtPs(float64(op.TimePs)))
		}
		b.WriteString("\n")
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "- %s\n", w)
	}
	return b.String()
}

// Markdown renders the comparison: headline deltas and the ops that
// changed most.
func (d *Diff) Markdown(topOps int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Profile A/B\n\nA: %s  \nB: %s\n\n", d.A, d.B)
	b.WriteString("| | A | B | Δ | Δ% |\n|---|---:|---:|---:|---:|\n")
	row := func(name string, x *Delta, f func(float64) string) {
		if x == nil {
			fmt.Fprintf(&b, "| %s | – | – | – | – |\n", name)
			return
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, f(x.A), f(x.B), f(x.Delta), fmtRel(x.Relative))
	}
	row("step time mean", d.StepTimeMean, fmtPs)
	row("step time median", d.StepTimeMedian, fmtPs)
	pct := func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }
	row("FLOPS utilization", d.FlopsUtilization, pct)
	row("model FLOPS utilization", d.ModelFlopsUtilization, pct)
	row("HBM bandwidth utilization", d.HBMBandwidthUtilization, pct)
	row("device idle", d.IdleFraction, pct)
	fmt.Fprintf(&b, "\nOp self time %s.\n\n", d.Basis)
	if len(d.Ops) > 0 {
		b.WriteString("| op | category | A | B | Δ | Δ% |\n|---|---|---:|---:|---:|---:|\n")
		for i, o := range d.Ops {
			if i == topOps {
				break
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", mdCell(o.Name), mdCell(orNone(o.Category)),
				fmtPs(o.A), fmtPs(o.B), fmtPs(o.Delta), fmtRel(o.Relative))
		}
		b.WriteString("\n")
	}
	only := func(title string, ops []Op) {
		if len(ops) == 0 {
			return
		}
		fmt.Fprintf(&b, "%s: ", title)
		for i, op := range ops {
			if i == topOps {
				fmt.Fprintf(&b, "and %d more", len(ops)-i)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(mdCell(op.Name))
		}
		b.WriteString("\n\n")
	}
	only("Only in A", d.OnlyInA)
	only("Only in B", d.OnlyInB)
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// fmtPs prints picoseconds in the unit that suits them.
func fmtPs(ps float64) string {
	a := ps
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 1e12:
		return fmt.Sprintf("%.3g s", ps/1e12)
	case a >= 1e9:
		return fmt.Sprintf("%.3g ms", ps/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.3g µs", ps/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.3g ns", ps/1e3)
	}
	return fmt.Sprintf("%.3g ps", ps)
}

func fmtShare(v *float64) string {
	if v == nil {
		return "– (no peak)"
	}
	return fmt.Sprintf("%.2f%%", 100**v)
}

func fmtRel(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%+.1f%%", 100**v)
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
