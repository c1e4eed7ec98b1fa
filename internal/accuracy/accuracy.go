package accuracy

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/falconhq/falcon/internal/npy"
)

// Tolerances are numpy.allclose's: |a - b| <= ATol + RTol * |b|.
type Tolerances struct {
	RTol float64 `json:"rtol"`
	ATol float64 `json:"atol"`
}

// DefaultTolerances are numpy's defaults.
var DefaultTolerances = Tolerances{RTol: 1e-5, ATol: 1e-8}

// Tensor is one pair of arrays compared.
type Tensor struct {
	Path   string `json:"path"`
	DTypeA string `json:"dtype_a"`
	DTypeB string `json:"dtype_b"`
	Shape  []int  `json:"shape"`
	// MaxAbsError and MaxRelError (|a-b| / |b|, over elements with b != 0).
	MaxAbsError  float64 `json:"max_abs_error"`
	MaxRelError  float64 `json:"max_rel_error"`
	MeanAbsError float64 `json:"mean_abs_error"`
	// Cosine similarity of the two as vectors; 1 when both are all zero.
	Cosine   float64 `json:"cosine"`
	AllClose bool    `json:"allclose"`
	// FirstMismatch is the index of the first element allclose refuses,
	// and Mismatches how many there are.
	FirstMismatch []int `json:"first_mismatch,omitempty"`
	Mismatches    int   `json:"mismatches"`
	// NaNMismatches counts elements where either side is NaN: numpy's
	// allclose refuses them (equal_nan is off by default), both NaN too.
	NaNMismatches int `json:"nan_mismatches"`
	// NonFinite counts elements with an infinity on either side; equal
	// infinities are close, others are mismatches. None of them enter the
	// errors or the cosine, which stay finite numbers.
	NonFinite int `json:"non_finite"`
}

// ShapeMismatch is a pair that could not be compared element by element.
type ShapeMismatch struct {
	Path   string `json:"path"`
	ShapeA []int  `json:"shape_a"`
	ShapeB []int  `json:"shape_b"`
}

// Report is a whole comparison.
type Report struct {
	Tolerances     Tolerances      `json:"tolerances"`
	Tensors        []Tensor        `json:"tensors"`
	ShapeMismatch  []ShapeMismatch `json:"shape_mismatch"`
	OnlyInA        []string        `json:"only_in_a"`
	OnlyInB        []string        `json:"only_in_b"`
	AllClose       int             `json:"allclose"`
	NotClose       int             `json:"not_close"`
	ComparedFiles  int             `json:"compared_files"`
	UnreadableA    []string        `json:"unreadable_a,omitempty"`
	UnreadableB    []string        `json:"unreadable_b,omitempty"`
	UnreadableWhy  []string        `json:"unreadable_why,omitempty"`
	PatternMatched bool            `json:"pattern_matched"`
}

// Source is one run's dump: its .npy files by relative path.
type Source interface {
	// Files lists the relative paths of the run's files.
	Files() ([]string, error)
	Open(rel string) (io.ReadCloser, error)
}

// Compare matches the .npy files of a and b whose relative path matches
// glob (path.Match; empty: every .npy file) and compares each pair.
func Compare(a, b Source, glob string, tol Tolerances) (*Report, error) {
	if glob != "" {
		if _, err := path.Match(glob, ""); err != nil {
			return nil, fmt.Errorf("--path %q is not a glob: %w", glob, err)
		}
	}
	pick := func(s Source) ([]string, error) {
		all, err := s.Files()
		if err != nil {
			return nil, err
		}
		var out []string
		for _, f := range all {
			if path.Ext(f) != ".npy" {
				continue
			}
			if glob != "" {
				if ok, _ := path.Match(glob, f); !ok {
					continue
				}
			}
			out = append(out, f)
		}
		slices.Sort(out)
		return out, nil
	}
	fa, err := pick(a)
	if err != nil {
		return nil, err
	}
	fb, err := pick(b)
	if err != nil {
		return nil, err
	}
	r := &Report{Tolerances: tol, Tensors: []Tensor{}, ShapeMismatch: []ShapeMismatch{}, OnlyInA: []string{}, OnlyInB: []string{}}
	r.PatternMatched = len(fa)+len(fb) > 0
	inB := map[string]bool{}
	for _, f := range fb {
		inB[f] = true
	}
	for _, f := range fa {
		if !inB[f] {
			r.OnlyInA = append(r.OnlyInA, f)
			continue
		}
		delete(inB, f)
		t, sm, err := comparePair(a, b, f, tol)
		switch {
		case err != nil:
			var side *sideErr
			if errors.As(err, &side) && side.b {
				r.UnreadableB = append(r.UnreadableB, f)
			} else {
				r.UnreadableA = append(r.UnreadableA, f)
			}
			r.UnreadableWhy = append(r.UnreadableWhy, err.Error())
		case sm != nil:
			r.ShapeMismatch = append(r.ShapeMismatch, *sm)
		default:
			r.Tensors = append(r.Tensors, *t)
			r.ComparedFiles++
			if t.AllClose {
				r.AllClose++
			} else {
				r.NotClose++
			}
		}
	}
	for _, f := range fb {
		if inB[f] {
			r.OnlyInB = append(r.OnlyInB, f)
		}
	}
	return r, nil
}

// sideErr says which run's file could not be read.
type sideErr struct {
	b   bool
	err error
}

func (e *sideErr) Error() string { return e.err.Error() }
func (e *sideErr) Unwrap() error { return e.err }

func comparePair(a, b Source, rel string, tol Tolerances) (*Tensor, *ShapeMismatch, error) {
	ra, err := a.Open(rel)
	if err != nil {
		return nil, nil, &sideErr{false, err}
	}
	defer ra.Close()
	rb, err := b.Open(rel)
	if err != nil {
		return nil, nil, &sideErr{true, err}
	}
	defer rb.Close()
	na, err := npy.Open("A:"+rel, ra)
	if err != nil {
		return nil, nil, &sideErr{false, err}
	}
	nb, err := npy.Open("B:"+rel, rb)
	if err != nil {
		return nil, nil, &sideErr{true, err}
	}
	if !slices.Equal(na.Header.Shape, nb.Header.Shape) {
		return nil, &ShapeMismatch{Path: rel, ShapeA: na.Header.Shape, ShapeB: nb.Header.Shape}, nil
	}
	t, err := CompareArrays(na, nb, tol)
	if err != nil {
		return nil, nil, err
	}
	t.Path = rel
	return t, nil, nil
}

// CompareArrays compares two arrays of the same shape element by element.
func CompareArrays(a, b *npy.Reader, tol Tolerances) (*Tensor, error) {
	t := &Tensor{DTypeA: a.Header.DType, DTypeB: b.Header.DType, Shape: a.Header.Shape, AllClose: true}
	var sumAbs, dot, na2, nb2 float64
	n := 0
	for i := 0; ; i++ {
		x, errA := a.Next()
		y, errB := b.Next()
		if errA == io.EOF && errB == io.EOF {
			break
		}
		if errA != nil {
			return nil, &sideErr{false, fmt.Errorf("A: %w", errA)}
		}
		if errB != nil {
			return nil, &sideErr{true, fmt.Errorf("B: %w", errB)}
		}
		if math.IsNaN(x) || math.IsNaN(y) {
			t.NaNMismatches++
			t.mismatch(i)
			continue
		}
		if math.IsInf(x, 0) || math.IsInf(y, 0) {
			t.NonFinite++
			if x != y {
				t.mismatch(i)
			}
			continue
		}
		n++
		d := math.Abs(x - y)
		sumAbs += d
		t.MaxAbsError = math.Max(t.MaxAbsError, d)
		if y != 0 {
			t.MaxRelError = math.Max(t.MaxRelError, d/math.Abs(y))
		}
		dot += x * y
		na2 += x * x
		nb2 += y * y
		if !(d <= tol.ATol+tol.RTol*math.Abs(y)) {
			t.mismatch(i)
		}
	}
	if n > 0 {
		t.MeanAbsError = sumAbs / float64(n)
	}
	switch {
	case na2 == 0 && nb2 == 0:
		t.Cosine = 1
	case na2 == 0 || nb2 == 0:
		t.Cosine = 0
	default:
		t.Cosine = dot / (math.Sqrt(na2) * math.Sqrt(nb2))
	}
	if t.FirstMismatch != nil {
		t.FirstMismatch = unravel(t.FirstMismatch[0], t.Shape)
	}
	return t, nil
}

func (t *Tensor) mismatch(i int) {
	if t.Mismatches == 0 {
		t.FirstMismatch = []int{i} // flat until the end
	}
	t.Mismatches++
	t.AllClose = false
}

// unravel turns a flat C-order index into one per dimension.
func unravel(i int, shape []int) []int {
	if len(shape) == 0 {
		return []int{}
	}
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			idx[d] = i % shape[d]
			i /= shape[d]
		}
	}
	return idx
}

// Markdown renders a report for people: a table of the tensors compared,
// then what could not be.
func Markdown(r *Report, a, b string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "# Accuracy: %s against %s\n\n", a, b)
	fmt.Fprintf(&s, "rtol %g, atol %g: %d of %d tensors allclose.\n\n", r.Tolerances.RTol, r.Tolerances.ATol, r.AllClose, len(r.Tensors))
	if len(r.Tensors) > 0 {
		s.WriteString("| tensor | shape | dtypes | max abs | max rel | mean abs | cosine | allclose | first mismatch |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, t := range r.Tensors {
			first := ""
			if t.FirstMismatch != nil {
				first = fmt.Sprint(t.FirstMismatch)
			}
			fmt.Fprintf(&s, "| %s | %v | %s/%s | %.3g | %.3g | %.3g | %.6f | %v | %s |\n",
				t.Path, t.Shape, t.DTypeA, t.DTypeB, t.MaxAbsError, t.MaxRelError, t.MeanAbsError, t.Cosine, t.AllClose, first)
		}
	}
	for _, m := range r.ShapeMismatch {
		fmt.Fprintf(&s, "\n- shapes differ: %s %v against %v", m.Path, m.ShapeA, m.ShapeB)
	}
	for _, f := range r.OnlyInA {
		fmt.Fprintf(&s, "\n- only in %s: %s", a, f)
	}
	for _, f := range r.OnlyInB {
		fmt.Fprintf(&s, "\n- only in %s: %s", b, f)
	}
	for _, why := range r.UnreadableWhy {
		fmt.Fprintf(&s, "\n- unreadable: %s", why)
	}
	s.WriteString("\n")
	return s.String()
}
