package runmetrics

import (
	"cmp"
	"math"
	"slices"
)

// Summary describes one metric's points.
type Summary struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
	// First and Last are the values at the lowest and highest step; among
	// points of one step, the order they were given in decides.
	First  float64 `json:"first"`
	Last   float64 `json:"last"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"` // of an even count, the mean of the middle two
	// Better is the spec's direction ("lower", "higher"), or "" when no
	// spec names the metric or its spec leaves it out.
	Better string `json:"better,omitempty"`
	Source Source `json:"source"` // the source the points were kept from
}

// Report is the summary of an experiment's metrics.
type Report struct {
	Metrics []Summary `json:"metrics"` // by name
	// Conflicts are the names reported both in metrics.jsonl and through a
	// log pattern; their file points were kept and their log points
	// dropped.
	Conflicts []string `json:"conflicts,omitempty"`
}

// Resolve drops the log points of every metric that metrics.jsonl also
// reports, and returns the points kept (in their order) and the names that
// conflicted, sorted. The file wins because the job wrote it on purpose,
// while a pattern may also catch lines it was not meant for. Use it for a
// metric's series as Summarize does for its summary.
func Resolve(points []Point) (kept []Point, conflicts []string) {
	inFile := make(map[string]bool)
	inLog := make(map[string]bool)
	for _, p := range points {
		if p.Source == SourceFile {
			inFile[p.Name] = true
		} else {
			inLog[p.Name] = true
		}
	}
	for n := range inLog {
		if inFile[n] {
			conflicts = append(conflicts, n)
		}
	}
	slices.Sort(conflicts)
	kept = make([]Point, 0, len(points))
	for _, p := range points {
		if p.Source == SourceFile || !inFile[p.Name] {
			kept = append(kept, p)
		}
	}
	return kept, conflicts
}

// Summarize summarizes points, as the Extractor emitted them or as read
// back from storage: it is a pure function of its input, so it gives the
// same report while the job runs and after. specs supply each metric's
// Better (nil is fine). Pass points in the order they were emitted (in SQL,
// ORDER BY the insertion ID) so that ties of step resolve the same way.
func Summarize(points []Point, specs []Spec) Report {
	kept, conflicts := Resolve(points)
	better := make(map[string]string, len(specs))
	for _, s := range specs {
		better[s.Name] = s.Better
	}
	byName := make(map[string][]Point)
	for _, p := range kept {
		byName[p.Name] = append(byName[p.Name], p)
	}
	r := Report{Metrics: make([]Summary, 0, len(byName)), Conflicts: conflicts}
	values := []float64(nil)
	for name, ps := range byName {
		slices.SortStableFunc(ps, func(a, b Point) int { return cmp.Compare(a.Step, b.Step) })
		s := Summary{
			Name: name, Count: int64(len(ps)), Better: better[name], Source: ps[0].Source,
			First: ps[0].Value, Last: ps[len(ps)-1].Value,
		}
		values = values[:0]
		for _, p := range ps {
			values = append(values, p.Value)
		}
		s.Min, s.Max, s.Mean = slices.Min(values), slices.Max(values), mean(values)
		slices.Sort(values)
		if n := len(values); n%2 == 1 {
			s.Median = values[n/2]
		} else {
			s.Median = values[n/2-1]/2 + values[n/2]/2
		}
		r.Metrics = append(r.Metrics, s)
	}
	slices.SortFunc(r.Metrics, func(a, b Summary) int { return cmp.Compare(a.Name, b.Name) })
	return r
}

// mean of finite values, which is finite even when their sum is not.
func mean(v []float64) float64 {
	var sum float64
	for _, x := range v {
		sum += x
	}
	if !math.IsInf(sum, 0) {
		return sum / float64(len(v))
	}
	n := float64(len(v))
	sum = 0
	for _, x := range v {
		sum += x / n
	}
	return sum
}
