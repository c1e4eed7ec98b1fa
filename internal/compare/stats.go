package compare

import (
	"math"
	"sort"
)

// MannWhitneyP is the two-sided p-value of the Mann-Whitney U test of a
// and b, with the normal approximation and its correction for ties. The
// test compares ranks, not means, so a few slow outlier steps (a
// checkpoint, a recompile) move it little, and no distribution is assumed.
// Equal samples (every value tied) give 1.
func MannWhitneyP(a, b []float64) float64 {
	a, b = finite(a), finite(b) // a NaN is equal to nothing, not even itself: it has no rank
	n1, n2 := float64(len(a)), float64(len(b))
	if n1 == 0 || n2 == 0 {
		return math.NaN()
	}
	type obs struct {
		v     float64
		first bool
	}
	all := make([]obs, 0, len(a)+len(b))
	for _, v := range a {
		all = append(all, obs{v, true})
	}
	for _, v := range b {
		all = append(all, obs{v, false})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	var r1, tie float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // mean of ranks i+1 .. j
		for k := i; k < j; k++ {
			if all[k].first {
				r1 += rank
			}
		}
		if t := float64(j - i); t > 1 {
			tie += t*t*t - t
		}
		i = j
	}
	u := r1 - n1*(n1+1)/2
	n := n1 + n2
	sigma2 := n1 * n2 / 12 * ((n + 1) - tie/(n*(n-1)))
	if sigma2 <= 0 {
		return 1
	}
	z := (math.Abs(u-n1*n2/2) - 0.5) / math.Sqrt(sigma2) // continuity correction
	if z < 0 {
		z = 0
	}
	return math.Erfc(z / math.Sqrt2)
}

func finite(v []float64) []float64 {
	out := v[:0:0]
	for _, x := range v {
		if !math.IsNaN(x) {
			out = append(out, x)
		}
	}
	return out
}
