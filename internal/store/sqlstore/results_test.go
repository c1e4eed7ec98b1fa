package sqlstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
)

func testArtifactFiles(t *testing.T, e env) {
	exp, jobs, art := newExp("files")
	exp.Metrics = []store.MetricSpec{{Name: "loss", Pattern: `loss=(?P<value>\\S+)`, Better: "lower"}}
	if err := e.s.CreateExp(ctx, exp, jobs, art); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.GetExp(ctx, exp.ID)
	if err != nil || !cmp.Equal(got.Metrics, exp.Metrics) {
		t.Fatalf("metric specs did not round-trip: %+v, %v", got.Metrics, err)
	}
	at := e.clk.Advance(time.Second)
	var files []store.ArtifactFile
	// More than one INSERT's worth, with paths whose byte order differs
	// from a naive directory walk ("a.txt" < "a/b" in bytes).
	for i := range 450 {
		files = append(files, store.ArtifactFile{Path: fmt.Sprintf("ckpt/%04d.bin", i), Size: int64(i), Checksum: "md5:00", Updated: at})
	}
	files = append(files,
		store.ArtifactFile{Path: "a/b", Size: 1, Checksum: "md5:01", Updated: at},
		store.ArtifactFile{Path: "a.txt", Size: 2, Checksum: "md5:02", Updated: at},
		store.ArtifactFile{Path: "name with spaces ü", Size: 3, Checksum: "md5:03", Updated: at},
		store.ArtifactFile{Path: "100%_done", Size: 4, Checksum: "md5:04", Updated: at},
		store.ArtifactFile{Path: ".falcon/config.yaml", Size: 5, Checksum: "md5:05", Updated: at},
	)
	idx := store.ArtifactIndex{Files: int64(len(files)), Bytes: 1234, At: &at}
	if err := e.s.SyncArtifactFiles(ctx, art.ID, files, nil, idx); err != nil {
		t.Fatal(err)
	}
	a, err := e.s.GetArtifact(ctx, art.ID)
	if err != nil || !cmp.Equal(a.Index, idx) {
		t.Fatalf("artifact index = %+v, %v; want %+v", a.Index, err, idx)
	}

	list := func(f store.ArtifactFileFilter) []string {
		t.Helper()
		f.ArtifactID = art.ID
		var out []string
		for {
			page, next, err := e.s.ListArtifactFiles(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range page {
				out = append(out, p.Path)
			}
			if next == "" {
				return out
			}
			f.After = next
		}
	}
	all := list(store.ArtifactFileFilter{Limit: 100})
	if len(all) != len(files)-1 || all[0] != "100%_done" || all[1] != "a.txt" || all[2] != "a/b" {
		t.Errorf("listing without hidden: %d files starting %v; want %d in byte order, .falcon/ left out", len(all), all[:3], len(files)-1)
	}
	if got := list(store.ArtifactFileFilter{Hidden: true}); len(got) != len(files) {
		t.Errorf("listing with hidden: %d files; want %d", len(got), len(files))
	}
	if got := list(store.ArtifactFileFilter{Prefix: "a"}); !cmp.Equal(got, []string{"a.txt", "a/b"}) {
		t.Errorf("prefix a: %v", got)
	}
	if got := list(store.ArtifactFileFilter{Prefix: "100%"}); !cmp.Equal(got, []string{"100%_done"}) {
		t.Errorf("prefix with %%: %v (LIKE wildcards must not apply)", got)
	}
	if got := list(store.ArtifactFileFilter{Prefix: "nothing/"}); len(got) != 0 {
		t.Errorf("empty prefix: %v", got)
	}

	// Changed and removed files; the rest stays.
	later := e.clk.Advance(time.Second)
	done := store.ArtifactIndex{Files: int64(len(files) - 2), Bytes: 99, Complete: true, At: &later}
	if err := e.s.SyncArtifactFiles(ctx, art.ID, []store.ArtifactFile{{Path: "a.txt", Size: 20, Checksum: "md5:22", Updated: later}},
		[]string{"a/b", "ckpt/0000.bin"}, done); err != nil {
		t.Fatal(err)
	}
	page, _, _ := e.s.ListArtifactFiles(ctx, store.ArtifactFileFilter{ArtifactID: art.ID, Prefix: "a"})
	if len(page) != 1 || page[0] != (store.ArtifactFile{Path: "a.txt", Size: 20, Checksum: "md5:22", Updated: later}) {
		t.Errorf("after sync: %+v", page)
	}
	if a, _ := e.s.GetArtifact(ctx, art.ID); !a.Index.Complete {
		t.Errorf("index not complete after a complete sync: %+v", a.Index)
	}
	if err := e.s.SyncArtifactFiles(ctx, "art-missing", nil, nil, done); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("sync of an unknown artifact = %v; want NotFound", err)
	}
	if _, _, err := e.s.ListArtifactFiles(ctx, store.ArtifactFileFilter{ArtifactID: art.ID, Limit: -1}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("negative page size = %v", err)
	}
}

func testMetrics(t *testing.T, e env) {
	exp, jobs, art := newExp("metrics")
	if err := e.s.CreateExp(ctx, exp, jobs, art); err != nil {
		t.Fatal(err)
	}
	var pts []store.MetricPoint
	for i := range 300 {
		pts = append(pts, store.MetricPoint{Name: "loss", Source: "file", Ord: int64(i), Step: int64(i * 10), Value: 1 / float64(i+1)})
	}
	cur := store.MetricCursor{Source: "file", Doc: `{"offset":100}`, Skipped: 2}
	if err := e.s.AppendMetrics(ctx, exp.ID, cur, pts); err != nil {
		t.Fatal(err)
	}
	// A re-read after a crash repeats points: they are stored once, and the
	// cursor moves on.
	cur2 := store.MetricCursor{Source: "file", Doc: `{"offset":200}`, Skipped: 3, Done: true}
	if err := e.s.AppendMetrics(ctx, exp.ID, cur2, append(pts[290:], store.MetricPoint{Name: "tflops", Source: "log", Ord: 0, Step: 5, Value: 312.5})); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.ListMetricPoints(ctx, exp.ID, nil)
	if err != nil || len(got) != 301 || got[0] != pts[0] || got[300].Name != "tflops" {
		t.Fatalf("points: %d, %v", len(got), err)
	}
	if only, _ := e.s.ListMetricPoints(ctx, exp.ID, []string{"tflops"}); len(only) != 1 || only[0].Value != 312.5 {
		t.Errorf("points of tflops: %+v", only)
	}
	curs, err := e.s.MetricCursors(ctx, exp.ID)
	if err != nil || len(curs) != 1 || curs[0] != cur2 {
		t.Errorf("cursors = %+v, %v; want %+v", curs, err, cur2)
	}
	if err := e.s.AppendMetrics(ctx, "exp-missing", cur, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("metrics of an unknown experiment = %v; want NotFound", err)
	}
	// Deleting the experiment takes its metrics and file index along.
	if _, _, err := e.s.ForceAbortExp(ctx, exp.ID, "done", "done"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.SyncArtifactFiles(ctx, art.ID, []store.ArtifactFile{{Path: "x", Checksum: "md5:0", Updated: e.clk.Now()}}, nil, store.ArtifactIndex{Files: 1}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.DeleteExp(ctx, exp.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.s.ListMetricPoints(ctx, exp.ID, nil); len(got) != 0 {
		t.Errorf("%d points outlived their experiment", len(got))
	}
}
