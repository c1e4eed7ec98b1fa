package accuracy

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/falconhq/falcon/internal/npy"
)

// dir is a Source over a directory.
type dir string

func (d dir) Files() ([]string, error) {
	var out []string
	err := filepath.WalkDir(string(d), func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(string(d), p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	return out, err
}

func (d dir) Open(rel string) (io.ReadCloser, error) { return os.Open(filepath.Join(string(d), rel)) }

func write(t *testing.T, root, rel, dtype string, shape []int, vals []float64) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := npy.Write(f, dtype, shape, vals); err != nil {
		t.Fatal(err)
	}
}

func TestCompare(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	// Same values: close, cosine 1.
	write(t, a, "layer0/w.npy", "float32", []int{2, 3}, []float64{1, 2, 3, 4, 5, 6})
	write(t, b, "layer0/w.npy", "float32", []int{2, 3}, []float64{1, 2, 3, 4, 5, 6})
	// bfloat16 against float32: 1.01 becomes 1.0078125 in bfloat16.
	write(t, a, "layer0/act.npy", "float32", []int{2, 2}, []float64{1.01, 2, 3, 4})
	write(t, b, "layer0/act.npy", "bfloat16", []int{2, 2}, []float64{1.01, 2, 3, 4})
	// One element off, at [1, 0].
	write(t, a, "out.npy", "float64", []int{2, 2}, []float64{1, 2, 3, 4})
	write(t, b, "out.npy", "float64", []int{2, 2}, []float64{1, 2, 3.5, 4})
	// NaN on one side.
	write(t, a, "nan.npy", "float32", []int{3}, []float64{1, math.NaN(), 3})
	write(t, b, "nan.npy", "float32", []int{3}, []float64{1, 2, 3})
	write(t, a, "bothnan.npy", "float32", []int{2}, []float64{math.NaN(), math.NaN()})
	write(t, b, "bothnan.npy", "float32", []int{2}, []float64{math.NaN(), math.NaN()})
	write(t, a, "inf.npy", "float32", []int{2}, []float64{math.Inf(1), 1})
	write(t, b, "inf.npy", "float32", []int{2}, []float64{math.Inf(1), 1})
	write(t, a, "infoff.npy", "float32", []int{2}, []float64{math.Inf(1), 1})
	write(t, b, "infoff.npy", "float32", []int{2}, []float64{1, 1})
	write(t, a, "shape.npy", "float32", []int{4}, []float64{1, 2, 3, 4})
	write(t, b, "shape.npy", "float32", []int{2, 2}, []float64{1, 2, 3, 4})
	write(t, a, "only_a.npy", "float32", []int{1}, []float64{1})
	write(t, b, "only_b.npy", "float32", []int{1}, []float64{1})
	if err := os.WriteFile(filepath.Join(b, "broken.npy"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, a, "broken.npy", "float32", []int{1}, []float64{1})
	if err := os.WriteFile(filepath.Join(a, "notes.txt"), []byte("not a tensor"), 0o644); err != nil {
		t.Fatal(err)
	}

	r, err := Compare(dir(a), dir(b), "", DefaultTolerances)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]Tensor{}
	for _, tt := range r.Tensors {
		byPath[tt.Path] = tt
	}
	if w := byPath["layer0/w.npy"]; !w.AllClose || w.Cosine != 1 || w.MaxAbsError != 0 || !slices.Equal(w.Shape, []int{2, 3}) {
		t.Errorf("identical: %+v", w)
	}
	act := byPath["layer0/act.npy"]
	if act.AllClose || act.DTypeB != "bfloat16" || math.Abs(act.MaxAbsError-(float64(float32(1.01))-1.0078125)) > 1e-9 || !slices.Equal(act.FirstMismatch, []int{0, 0}) {
		t.Errorf("bfloat16 vs float32 at default tolerances: %+v", act)
	}
	out := byPath["out.npy"]
	if out.AllClose || out.Mismatches != 1 || !slices.Equal(out.FirstMismatch, []int{1, 0}) || out.MaxAbsError != 0.5 || math.Abs(out.MaxRelError-0.5/3.5) > 1e-12 || out.MeanAbsError != 0.125 {
		t.Errorf("one element off: %+v", out)
	}
	if n := byPath["nan.npy"]; n.AllClose || n.NaNMismatches != 1 || !slices.Equal(n.FirstMismatch, []int{1}) {
		t.Errorf("NaN on one side: %+v", n)
	}
	// As numpy.allclose: NaN against NaN is not close; equal infinities
	// are; the errors stay finite, so the report can be written as JSON.
	if n := byPath["bothnan.npy"]; n.AllClose || n.NaNMismatches != 2 {
		t.Errorf("NaN on both sides: %+v", n)
	}
	inf := byPath["inf.npy"]
	if !inf.AllClose || inf.NonFinite != 1 || inf.MaxAbsError != 0 || math.IsNaN(inf.Cosine) {
		t.Errorf("equal infinities: %+v", inf)
	}
	if o := byPath["infoff.npy"]; o.AllClose || o.NonFinite != 1 || math.IsInf(o.MaxAbsError, 0) || math.IsNaN(o.MaxRelError) {
		t.Errorf("an infinity against a number: %+v", o)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("the report does not encode as JSON: %v", err)
	}
	if len(r.ShapeMismatch) != 1 || r.ShapeMismatch[0].Path != "shape.npy" {
		t.Errorf("shape mismatches %+v", r.ShapeMismatch)
	}
	if !slices.Equal(r.OnlyInA, []string{"only_a.npy"}) || !slices.Equal(r.OnlyInB, []string{"only_b.npy"}) {
		t.Errorf("only in a %v, only in b %v", r.OnlyInA, r.OnlyInB)
	}
	if !slices.Equal(r.UnreadableB, []string{"broken.npy"}) || !strings.Contains(r.UnreadableWhy[0], "B:broken.npy") {
		t.Errorf("unreadable %v %v", r.UnreadableB, r.UnreadableWhy)
	}
	if r.ComparedFiles != 7 || r.AllClose != 2 || r.NotClose != 5 {
		t.Errorf("compared %d, close %d, not %d", r.ComparedFiles, r.AllClose, r.NotClose)
	}

	// Looser tolerances accept the bfloat16 rounding; --path narrows.
	r, err = Compare(dir(a), dir(b), "layer0/*", Tolerances{RTol: 1e-2, ATol: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tensors) != 2 || r.AllClose != 2 {
		t.Errorf("layer0/* at rtol 1e-2: %+v", r.Tensors)
	}
	if _, err := Compare(dir(a), dir(b), "[", DefaultTolerances); err == nil || !strings.Contains(err.Error(), "--path") {
		t.Errorf("bad glob: %v", err)
	}
}
