package sim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/falconhq/falcon/internal/accelerator"
)

// Shape is one slice shape a generated trace asks for.
type Shape struct {
	Accelerator string
	Topology    string
	Hosts       int
}

func (s Shape) String() string { return s.Accelerator + ":" + s.Topology }

// ParseShapes reads "v5p:2x2x1,v5p:2x2x4,v7x:2x2x2" (the --shapes flag),
// checking each against the accelerator table.
func ParseShapes(s string) ([]Shape, error) {
	var out []Shape
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		typ, topo, ok := strings.Cut(f, ":")
		if !ok {
			return nil, fmt.Errorf("--shapes: %q must be ACCELERATOR:TOPOLOGY, e.g. v5p:2x2x4", f)
		}
		spec, err := accelerator.Lookup(typ)
		if err != nil {
			return nil, fmt.Errorf("--shapes: %q: %v", f, err)
		}
		if spec.Kind != accelerator.KindTPU {
			return nil, fmt.Errorf("--shapes: %q: %s is a %s type; the simulator models TPU node pools only", f, spec.Name, spec.Kind)
		}
		sl, err := spec.Slice(topo, 1, 0)
		if err != nil && spec.ChipsPerHost > 0 {
			var sl2 accelerator.Slice
			if sl2, err = spec.Slice(topo, chips(topo)/spec.ChipsPerHost, 0); err == nil {
				sl = sl2
			}
		}
		if err != nil {
			return nil, fmt.Errorf("--shapes: %q: %v", f, err)
		}
		out = append(out, Shape{Accelerator: spec.Name, Topology: sl.Topology, Hosts: sl.Hosts})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--shapes: give at least one ACCELERATOR:TOPOLOGY")
	}
	return out, nil
}

func chips(topo string) int {
	n := 1
	for _, d := range strings.Split(strings.ToLower(topo), "x") {
		var v int
		if _, err := fmt.Sscan(d, &v); err != nil || v <= 0 {
			return 0
		}
		n *= v
	}
	return n
}

// GenOptions shape a synthetic trace (falcon sim gen).
type GenOptions struct {
	Users  int
	Jobs   int
	Shapes []Shape
	// Burstiness in [0, 1]: 0 submits every job on its own at a random
	// time; 1 submits them in sessions of about ten jobs of one shape a few
	// minutes apart, as people iterating on one model do.
	Burstiness float64
	Start      time.Time
	Span       time.Duration // arrivals fall in [Start, Start+Span)
	Seed       uint64
}

// Generate writes a deterministic trace: the same options give the same
// jobs. Users are u01, u02, ... with Zipf-like activity (the first user
// submits most); each user has a usual shape, used by 70% of their
// sessions; jobs run 5-90 minutes, short ones more often (the simulated
// day's distribution).
func Generate(o GenOptions) ([]Job, error) {
	switch {
	case o.Users < 1:
		return nil, fmt.Errorf("--users must be at least 1, got %d", o.Users)
	case o.Jobs < 1:
		return nil, fmt.Errorf("--jobs must be at least 1, got %d", o.Jobs)
	case o.Burstiness < 0 || o.Burstiness > 1:
		return nil, fmt.Errorf("--burstiness must be between 0 and 1, got %g", o.Burstiness)
	case len(o.Shapes) == 0:
		return nil, fmt.Errorf("--shapes: give at least one ACCELERATOR:TOPOLOGY")
	case o.Span <= 0:
		return nil, fmt.Errorf("--span must be positive, got %s", o.Span)
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	weights := make([]float64, o.Users)
	total := 0.0
	for i := range weights {
		weights[i] = 1 / float64(i+1)
		total += weights[i]
	}
	var jobs []Job
	for len(jobs) < o.Jobs {
		w := rng.Float64() * total
		u := 0
		for u < o.Users-1 && w >= weights[u] {
			w -= weights[u]
			u++
		}
		shape := o.Shapes[u%len(o.Shapes)]
		if rng.Float64() >= 0.7 {
			shape = o.Shapes[rng.IntN(len(o.Shapes))]
		}
		size := 1
		if rng.Float64() < o.Burstiness {
			size = 3 + rng.IntN(15)
		}
		at := time.Duration(rng.Int64N(int64(o.Span)))
		for k := 0; k < size && len(jobs) < o.Jobs; k++ {
			d := rng.Float64()
			jobs = append(jobs, Job{
				T: o.Start.Add(at).Truncate(time.Second), User: fmt.Sprintf("u%02d", u+1),
				Accelerator: shape.Accelerator, Topology: shape.Topology, Hosts: shape.Hosts,
				Duration: time.Duration(300+int(d*d*5100)) * time.Second,
			})
			at += time.Duration(20+rng.IntN(280)) * time.Second
		}
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].T.Before(jobs[b].T) })
	return jobs, nil
}
