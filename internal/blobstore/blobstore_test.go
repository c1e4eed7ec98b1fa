package blobstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/testenv/gcstest"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "gs://bkt", want: "gs://bkt/"},
		{in: "gs://bkt/a/b", want: "gs://bkt/a/b/"},
		{in: "gs://bkt/a/b/", want: "gs://bkt/a/b/"},
		{in: "file:///tmp/x/", want: "file:///tmp/x/"},
		{in: "/tmp/x/../y", want: "file:///tmp/y/"},
		{in: "", err: "is required"},
		{in: "gs://B", err: "valid bucket"},
		{in: "gs://bkt/a/../b", err: "must be clean"},
		{in: "gs://bkt/a?x=1", err: "no query"},
		{in: "s3://bkt", err: "gs:// or file://"},
		{in: "file://host/x", err: "local directory"},
		{in: "relative/dir", err: "gs:// or file://"},
		{in: "file:///tmp/run#2/", err: "no query or fragment"},
		{in: "file:///tmp/x?y", err: "no query or fragment"},
		{in: "file:///tmp/x#", err: "no query or fragment"},
		{in: "file:///tmp/run%232/", want: "file:///tmp/run%232/"},
		{in: "/tmp/run#2", want: "file:///tmp/run%232/"},
		{in: "/tmp/100% ü?", want: "file:///tmp/100%25 ü%3F/"},
	} {
		l, err := blobstore.Parse("--artifact-root", tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--artifact-root") || !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("Parse(%q) = %v, %v; want an InvalidArgument naming the flag and %q", tc.in, l, err, tc.err)
			}
			continue
		}
		if err != nil || l.String() != tc.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, l, err, tc.want)
		}
		// A location's string is stored (an artifact's path) and parsed
		// again: it must name the same place.
		if again, err := blobstore.Parse("path", l.String()); err != nil || again != l {
			t.Errorf("Parse(%q) = %+v, %v; want %+v back", l.String(), again, err, l)
		}
	}
}

func TestRel(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "a.txt", want: "a.txt"},
		{in: "dir/sub/f", want: "dir/sub/f"},
		{in: "dir/./f", want: "dir/f"},
		{in: "dir/", want: "dir/"},
		{in: "name with spaces ü.bin", want: "name with spaces ü.bin"},
		{in: "100%25 done", want: "100%25 done"},
		{in: "..", bad: true},
		{in: "../secret", bad: true},
		{in: "a/../../b", bad: true},
		{in: "/etc/passwd", bad: true},
		{in: "%2e%2e/secret", bad: true},
		{in: "%252e%252e/secret", bad: true},
		{in: "..%2fsecret", bad: true},
		{in: "%2fetc", bad: true},
		{in: "a\\..\\b", bad: true},
		{in: "a\x00b", bad: true},
		{in: "", bad: true},
		{in: ".", bad: true},
	} {
		got, err := blobstore.Rel("path", tc.in, false)
		if tc.bad {
			if err == nil || !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "path") {
				t.Errorf("Rel(%q) = %q, %v; want InvalidArgument naming the path", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Rel(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if got, err := blobstore.Rel("prefix", "", true); err != nil || got != "" {
		t.Errorf("Rel(empty, allowEmpty) = %q, %v", got, err)
	}
}

// stores runs fn against a file:// directory and a gs:// bucket on
// fake-gcs-server, each holding the same files.
func stores(t *testing.T, files map[string][]byte, fn func(t *testing.T, o *blobstore.Opener, l blobstore.Location)) {
	ctx := context.Background()
	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		for p, b := range files {
			full := filepath.Join(dir, "art", filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		l, err := blobstore.Parse("root", "file://"+filepath.ToSlash(dir)+"/art/")
		if err != nil {
			t.Fatal(err)
		}
		o := blobstore.NewOpener()
		defer o.Close()
		fn(t, o, l)
	})
	t.Run("gcs", func(t *testing.T) {
		srv := gcstest.Start(t, "", "results")
		o := blobstore.NewOpener(blobstore.WithGCSOptions(srv.ClientOptions()...))
		defer o.Close()
		l, _ := blobstore.Parse("root", "gs://results/experiments/e1/artifacts/a1/")
		for p, b := range files {
			w, err := o.Writer(ctx, l, p, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(b); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		fn(t, o, l)
	})
}

func crcOf(b []byte) string {
	return fmt.Sprintf("crc32c:%08x", crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

func TestWalkOpenChecksum(t *testing.T) {
	big := bytes.Repeat([]byte{0, 1, 2, 250}, 1<<18) // 1 MiB of binary
	files := map[string][]byte{
		"empty":                  {},
		"one":                    {'x'},
		"nested/dir/deep.txt":    []byte("deep\n"),
		"name with spaces ü.txt": []byte("unicode"),
		"big.bin":                big,
	}
	stores(t, files, func(t *testing.T, o *blobstore.Opener, l blobstore.Location) {
		ctx := context.Background()
		seen := map[string]blobstore.File{}
		var order []string
		if err := o.Walk(ctx, l, func(f blobstore.File) error {
			seen[f.Path] = f
			order = append(order, f.Path)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(seen) != len(files) {
			t.Fatalf("walked %v; want %d files", order, len(files))
		}
		for i := 1; i < len(order); i++ {
			if order[i-1] >= order[i] {
				t.Errorf("walk order %v is not key order", order)
			}
		}
		for p, b := range files {
			f, ok := seen[p]
			if !ok || f.Size != int64(len(b)) || f.Updated.IsZero() {
				t.Errorf("walk: %q = %+v; want size %d and a time", p, f, len(b))
				continue
			}
			sum, err := o.Checksum(ctx, l, p)
			if err != nil || sum != crcOf(b) {
				t.Errorf("Checksum(%q) = %q, %v; want %s", p, sum, err, crcOf(b))
			}
			if f.Checksum != "" && f.Checksum != sum {
				t.Errorf("walk checksum of %q = %s; content's is %s", p, f.Checksum, sum)
			}
		}
		r, f, err := o.Open(ctx, l, "big.bin", 1000, 24)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(r)
		r.Close()
		if f.Size != int64(len(big)) || !bytes.Equal(got, big[1000:1024]) {
			t.Errorf("Open(big.bin, 1000, 24): size %d, %d bytes read; want %d and the slice", f.Size, len(got), len(big))
		}
		if _, _, err := o.Open(ctx, l, "missing", 0, -1); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "missing") {
			t.Errorf("Open(missing) = %v; want NotFound naming it", err)
		}
		if _, _, err := o.Open(ctx, l, "one", 5, -1); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Open past the end = %v; want InvalidArgument", err)
		}
		// At the end (where a reader that read it all asks again): nothing
		// more, not an error (GCS refuses such a range).
		for _, p := range []string{"one", "empty", "big.bin"} {
			r, _, err := o.Open(ctx, l, p, int64(len(files[p])), -1)
			if err != nil {
				t.Errorf("Open(%s) at its end: %v", p, err)
				continue
			}
			if got, err := io.ReadAll(r); len(got) != 0 || err != nil {
				t.Errorf("Open(%s) at its end read %d bytes, %v; want none", p, len(got), err)
			}
			r.Close()
		}
		sub := l.Join("nested")
		n := 0
		_ = o.Walk(ctx, sub, func(f blobstore.File) error {
			n++
			if f.Path != "dir/deep.txt" {
				t.Errorf("walk of nested/: %q", f.Path)
			}
			return nil
		})
		if n != 1 {
			t.Errorf("walk of nested/ saw %d files; want 1", n)
		}
	})
}

// TestWalkPagesOnFile walks a file:// tree larger than the first page (every
// file once, in key order) and a small one, which must not cost the large
// page's up-front slice: the server walks a small tree for every experiment
// that ends.
func TestWalkPagesOnFile(t *testing.T) {
	ctx := context.Background()
	o := blobstore.NewOpener()
	defer o.Close()
	walk := func(t *testing.T, l blobstore.Location) []string {
		var order []string
		if err := o.Walk(ctx, l, func(f blobstore.File) error {
			order = append(order, f.Path)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return order
	}

	t.Run("large", func(t *testing.T) {
		var files []string
		for i := range 2500 {
			files = append(files, fmt.Sprintf("d%d/f%04d", i%7, i))
		}
		order := walk(t, fileTree(t, files))
		if len(order) != len(files) {
			t.Fatalf("walked %d files; want %d", len(order), len(files))
		}
		for i := 1; i < len(order); i++ {
			if order[i-1] >= order[i] {
				t.Fatalf("walk order breaks at %q, %q", order[i-1], order[i])
			}
		}
	})
	t.Run("small", func(t *testing.T) {
		files := []string{"a", "b/c", "d"}
		l := fileTree(t, files)
		walk(t, l) // opens the bucket
		const walks = 5
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range walks {
			if got := walk(t, l); len(got) != len(files) {
				t.Fatalf("walked %v; want %v", got, files)
			}
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / walks; per > 256<<10 {
			t.Errorf("a walk of %d files allocated %d bytes; want under 256 KiB", len(files), per)
		}
	})
}

// TestChecksumReadsThroughASmallBuffer checksums a small file on file://,
// as the server does for every file of each experiment that ends: it must
// not cost the 1 MiB buffer of the blob reader's WriteTo.
func TestChecksumReadsThroughASmallBuffer(t *testing.T) {
	ctx := context.Background()
	content := []byte("metrics.csv") // fileTree writes each file's path into it
	l := fileTree(t, []string{"metrics.csv"})
	o := blobstore.NewOpener()
	defer o.Close()
	if sum, err := o.Checksum(ctx, l, "metrics.csv"); err != nil || sum != crcOf(content) { // opens the bucket
		t.Fatalf("Checksum = %q, %v; want %s", sum, err, crcOf(content))
	}
	const sums = 5
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range sums {
		if _, err := o.Checksum(ctx, l, "metrics.csv"); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / sums; per > 64<<10 {
		t.Errorf("a checksum of %d bytes allocated %d bytes; want under 64 KiB", len(content), per)
	}
}

// BenchmarkChecksumSmallFile checksums a small file on file://, as the
// server does for every file of each experiment that ends; B/op is what
// TestChecksumReadsThroughASmallBuffer bounds.
func BenchmarkChecksumSmallFile(b *testing.B) {
	l := fileTree(b, []string{"metrics.csv"})
	o := blobstore.NewOpener()
	defer o.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := o.Checksum(ctx, l, "metrics.csv"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWalkSmallTree walks a three-file tree on file://, as the server
// does for each experiment that ends (its artifact index); B/op is what
// TestWalkPagesOnFile bounds.
func BenchmarkWalkSmallTree(b *testing.B) {
	l := fileTree(b, []string{"a", "b/c", "d"})
	o := blobstore.NewOpener()
	defer o.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := o.Walk(ctx, l, func(blobstore.File) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// fileTree writes files (slash paths, each holding its own path) under a
// new directory and returns its location.
func fileTree(tb testing.TB, files []string) blobstore.Location {
	tb.Helper()
	dir := tb.TempDir()
	for _, p := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	l, err := blobstore.Parse("root", dir)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}
