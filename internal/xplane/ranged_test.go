package xplane_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/xplane"
	"github.com/falconhq/falcon/internal/xplane/xplanetest"
)

// TestRangeReaderAt walks a profile through ranged streams, as from a
// bucket, and gets what a walk of the file gets, with a few streams per
// plane.
func TestRangeReaderAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.xplane.pb")
	s := syntheticSpec()
	s.Steps = 100
	tot, err := xplanetest.WriteSynthetic(path, s)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ra := xplane.NewRangeReaderAt(func(off int64) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw[off:])), nil
	})
	defer ra.Close()

	var fromFile, fromRanges recorder
	if _, err := walkFile(t, path, xplane.WalkOptions{}, &fromFile); err != nil {
		t.Fatal(err)
	}
	sum, err := xplane.NewReader("gs://bucket/p.xplane.pb", ra, int64(len(raw))).Walk(context.Background(), xplane.WalkOptions{}, &fromRanges)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromFile.planes, fromRanges.planes) { // cmp.Diff takes seconds on 200k events
		t.Errorf("walk through ranges differs:\n%s", cmp.Diff(fromFile.planes[0].Lines[0], fromRanges.planes[0].Lines[0], cmpOpts...))
	}
	// Sequential reads share a stream; only jumps back (to a plane's or a
	// line's start) or far ahead open another.
	if sum.Events != tot.Events || ra.Opens() > 30 {
		t.Errorf("%d events (want %d) in %d streams", sum.Events, tot.Events, ra.Opens())
	}
	t.Logf("%d bytes in %d streams", len(raw), ra.Opens())

	// Reads past the end say so, and a truncated object is refused by name.
	buf := make([]byte, 10)
	if n, err := ra.ReadAt(buf, int64(len(raw))-4); n != 4 || err != io.EOF {
		t.Errorf("ReadAt at the end: %d, %v", n, err)
	}
	cut := raw[:len(raw)-100]
	short := xplane.NewRangeReaderAt(func(off int64) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(cut[off:])), nil })
	if _, err := xplane.NewReader("gs://bucket/p.xplane.pb", short, int64(len(cut))).Walk(context.Background(), xplane.WalkOptions{}, &recorder{}); !isCorrupt(err, "gs://bucket/p.xplane.pb") {
		t.Errorf("truncated object: %v", err)
	}
}
