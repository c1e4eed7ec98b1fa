package compare

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Verdicts of a metric's change against the baseline.
const (
	Regression  = "regression"
	Improvement = "improvement"
	WithinNoise = "within noise"
	// NoDirection: the metric changed beyond noise but nothing says
	// whether up is better (no better: in the manifest, no known name).
	NoDirection = "changed (direction unknown)"
	// TooFewSteps: not enough samples after warm-up for a verdict.
	TooFewSteps = "too few steps"
)

// MinSamples is the fewest steps after warm-up each side needs for a
// verdict: below it a rank test cannot tell a change from noise.
const MinSamples = 5

// Series is one experiment's points of one metric, in step order.
type Series struct {
	Name   string
	Better string // "lower", "higher" or "" (unknown)
	Values []float64
}

// Options tune Metrics.
type Options struct {
	// SkipSteps drops the first steps of every series as warm-up; negative
	// means the default, the first 10% (at most 100).
	SkipSteps int
	// Threshold is the least relative change (0.02 for 2%) that counts.
	Threshold float64
	// Alpha is the significance the rank test must reach (two-sided).
	Alpha float64
}

// DefaultOptions: the first 10% of steps are warm-up, a change must be at
// least 2% and significant at 1%.
var DefaultOptions = Options{SkipSteps: -1, Threshold: 0.02, Alpha: 0.01}

// Value is an experiment's steady state of one metric.
type Value struct {
	Experiment string  `json:"experiment"`
	Steps      int     `json:"steps"`   // after warm-up
	Skipped    int     `json:"skipped"` // warm-up steps dropped
	Median     float64 `json:"median"`
	// Against the baseline (the first experiment); zero for it.
	Delta    float64 `json:"delta"`
	Relative float64 `json:"relative"` // Delta / baseline median
	// P is the rank test's two-sided p-value; nil without a verdict.
	P       *float64 `json:"p,omitempty"`
	Verdict string   `json:"verdict"`
	Why     string   `json:"why,omitempty"`
}

// MetricResult is one metric across the experiments; Values[0] is the
// baseline.
type MetricResult struct {
	Name   string  `json:"name"`
	Better string  `json:"better"`
	Values []Value `json:"values"`
}

// Result is Metrics's answer.
type Result struct {
	Experiments []string       `json:"experiments"`
	Metrics     []MetricResult `json:"metrics"`
	// Regressed is true when any metric of any experiment regressed.
	Regressed bool `json:"regressed"`
}

// Metrics compares each metric the experiments have in common: series[i]
// are experiment ids[i]'s, and ids[0] is the baseline. Only names in
// metrics are compared when it is non-empty. It fails when no metric is
// common to all, naming what each has.
func Metrics(ids []string, series []map[string]Series, metrics []string, o Options) (*Result, error) {
	common := map[string]bool{}
	for name := range series[0] {
		common[name] = true
	}
	for _, s := range series[1:] {
		for name := range common {
			if _, ok := s[name]; !ok {
				delete(common, name)
			}
		}
	}
	var names []string
	if len(metrics) > 0 {
		for _, m := range metrics {
			for i, s := range series {
				if _, ok := s[m]; !ok {
					return nil, fmt.Errorf("--metric %s: experiment %s reports no such metric; it has: %s", m, ids[i], orNone(keys(s)))
				}
			}
		}
		names = metrics
	} else {
		for n := range common {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	if len(names) == 0 {
		var has []string
		for i, s := range series {
			has = append(has, fmt.Sprintf("%s has %s", ids[i], orNone(keys(s))))
		}
		return nil, fmt.Errorf("no metric in common: %s", strings.Join(has, "; "))
	}
	res := &Result{Experiments: ids}
	for _, name := range names {
		better := ""
		for _, s := range series {
			if b := s[name].Better; b != "" {
				better = b
				break
			}
		}
		if better == "" {
			better = KnownDirection(name)
		}
		mr := MetricResult{Name: name, Better: better}
		base, bskip := steady(series[0][name].Values, o.SkipSteps)
		bmed := median(base)
		mr.Values = append(mr.Values, Value{Experiment: ids[0], Steps: len(base), Skipped: bskip, Median: bmed})
		for i := 1; i < len(ids); i++ {
			cand, cskip := steady(series[i][name].Values, o.SkipSteps)
			v := Value{Experiment: ids[i], Steps: len(cand), Skipped: cskip, Median: median(cand)}
			v.Delta = v.Median - bmed
			if bmed != 0 {
				v.Relative = v.Delta / math.Abs(bmed)
			}
			var p float64
			v.Verdict, v.Why, p = verdict(base, cand, v.Relative, bmed == 0 && v.Delta != 0, better, o)
			if !math.IsNaN(p) {
				v.P = &p
			}
			if v.Verdict == Regression {
				res.Regressed = true
			}
			mr.Values = append(mr.Values, v)
		}
		res.Metrics = append(res.Metrics, mr)
	}
	return res, nil
}

// verdict judges a change; fromZero is a change from a baseline of 0,
// which no relative threshold can measure: it counts as beyond it, and the
// rank test decides.
func verdict(base, cand []float64, rel float64, fromZero bool, better string, o Options) (string, string, float64) {
	if len(base) < MinSamples || len(cand) < MinSamples {
		return TooFewSteps, fmt.Sprintf("%d and %d steps after warm-up; a verdict needs at least %d each", len(base), len(cand), MinSamples), math.NaN()
	}
	p := MannWhitneyP(base, cand)
	if fromZero {
		rel = math.Copysign(math.Inf(1), mean(cand)) // for the direction only
	}
	if math.Abs(rel) < o.Threshold {
		return WithinNoise, fmt.Sprintf("%+.2f%% is under the %.2g%% threshold", rel*100, o.Threshold*100), p
	}
	if p >= o.Alpha {
		return WithinNoise, fmt.Sprintf("p = %.3g: the step samples overlap too much to call it (needs p < %g)", p, o.Alpha), p
	}
	switch {
	case better == "lower" && rel > 0, better == "higher" && rel < 0:
		return Regression, "", p
	case better == "lower", better == "higher":
		return Improvement, "", p
	}
	return NoDirection, "set better: lower or higher on the metric in the manifest", p
}

// steady drops warm-up steps: skip of them, or by default the first 10%
// (at most 100).
func steady(v []float64, skip int) ([]float64, int) {
	if skip < 0 {
		skip = min(len(v)/10, 100)
	}
	skip = min(skip, len(v))
	return v[skip:], skip
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// median is 0 for no values, which only go with a TooFewSteps verdict.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// KnownDirection guesses a metric's direction from its name, for metrics
// whose manifest says none: times, latencies, losses and memory are better
// lower; throughputs, FLOPS, utilization and accuracy higher.
func KnownDirection(name string) string {
	n := strings.ToLower(name)
	for _, h := range []string{"throughput", "tflops", "flops", "mfu", "utilization", "per_sec", "per_second", "/s", "_qps", "qps", "tokens_s", "samples_s", "accuracy", "bandwidth"} {
		if strings.Contains(n, h) {
			return "higher"
		}
	}
	for _, l := range []string{"time", "latency", "loss", "memory", "_ms", "_us", "_ns", "_seconds", "_sec", "duration", "hbm", "bytes"} {
		if strings.Contains(n, l) {
			return "lower"
		}
	}
	return ""
}

func keys(m map[string]Series) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
