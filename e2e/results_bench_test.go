package e2e

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/testenv/gcstest"
)

// resultsBytes is how much the results benchmark moves: 1 GiB by default
// (the figure), less with FALCON_RESULTS_MIB for a quick run.
func resultsBytes(b *testing.B) int64 {
	mib := int64(1024)
	if v := os.Getenv("FALCON_RESULTS_MIB"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 8 {
			b.Fatalf("FALCON_RESULTS_MIB=%q: want a number of MiB, at least 8", v)
		}
		mib = n
	}
	return mib << 20
}

// procKiB reads a field (VmRSS, VmHWM) of /proc/<pid>/status in KiB.
func procKiB(b *testing.B, pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// peakGrowth runs fn and returns how far the server's resident memory rose
// above what it was before, in MiB: the peak (VmHWM, reset first through
// clear_refs) minus the resident size at the start.
func peakGrowth(b *testing.B, pid int, fn func()) float64 {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		b.Fatalf("reset the peak RSS of falcon dev: %v", err)
	}
	before := procKiB(b, pid, "VmRSS")
	fn()
	return float64(procKiB(b, pid, "VmHWM")-before) / 1024
}

// BenchmarkResults moves 1 GiB out of falcon dev through the API server:
// artifact get of 8 files against a plain read of the same files from the
// same store (gocloud.dev/blob, as the server reads them), exp logs of a
// 1 GiB log, and logs export of it. It reports throughput, the ratio to the
// plain read, and how far the server's RSS rose.
func BenchmarkResults(b *testing.B) {
	total := resultsBytes(b)
	d := startDev(b, "")
	pid := d.cmd.Process.Pid
	per := total / 8
	manifest := fmt.Sprintf(`name: results-bench
role_to_task_spec:
  main:
    command: |
      for i in 1 2 3 4 5 6 7 8; do head -c %d /dev/urandom > "$FALCON_ARTIFACT_DIR/part-$i.bin"; done
      # The log: lines of 100 bytes, %d MiB in all.
      yes "step=12345 loss=0.123456 tflops=312.5 the quick brown fox jumps over the lazy dog padding.." | head -c %d
    replica: 1
`, per, total>>20, total)
	id := d.create(manifest)["id"].(string)
	if r := d.run("", "exp", "wait", id, "--timeout", "20m"); r.code != 0 {
		b.Fatalf("wait: %d %s", r.code, r.stderr)
	}
	l := d.ls(id) // indexes (and checksums) the files once
	if len(l.Items) != 8 {
		b.Fatalf("ls: %d files", len(l.Items))
	}
	art := d.mustJSON("exp", "get", id)["artifact"].(map[string]any)
	loc, err := blobstore.Parse("path", art["path"].(string))
	if err != nil {
		b.Fatal(err)
	}

	b.Run("plain-read", func(b *testing.B) {
		o := blobstore.NewOpener()
		defer o.Close()
		b.SetBytes(total)
		for b.Loop() {
			for i := 1; i <= 8; i++ {
				r, _, err := o.Open(context.Background(), loc, fmt.Sprintf("part-%d.bin", i), 0, -1)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, r); err != nil {
					b.Fatal(err)
				}
				r.Close()
			}
		}
	})
	// What a user does without Falcon: copy the objects to local files,
	// checking each one's CRC32C (as gcloud storage cp does), four at a
	// time.
	b.Run("plain-copy", func(b *testing.B) {
		o := blobstore.NewOpener()
		defer o.Close()
		b.SetBytes(total)
		for b.Loop() {
			verifiedCopy(b, o, loc)
		}
	})
	b.Run("artifact-get", func(b *testing.B) {
		b.SetBytes(total)
		var growth float64
		for b.Loop() {
			dir := filepath.Join(b.TempDir(), "out")
			growth = max(growth, peakGrowth(b, pid, func() {
				if r := d.run("", "artifact", "get", id, "--to", dir); r.code != 0 {
					b.Fatalf("get: %d %s", r.code, r.stderr)
				}
			}))
			os.RemoveAll(dir)
		}
		b.ReportMetric(growth, "server-rss-growth-MiB")
	})
	b.Run("artifact-cat", func(b *testing.B) {
		b.SetBytes(total)
		var growth float64
		for b.Loop() {
			growth = max(growth, peakGrowth(b, pid, func() {
				for i := 1; i <= 8; i++ {
					if r := d.runTo(io.Discard, "artifact", "cat", id, fmt.Sprintf("part-%d.bin", i)); r.code != 0 {
						b.Fatalf("cat: %d %s", r.code, r.stderr)
					}
				}
			}))
		}
		b.ReportMetric(growth, "server-rss-growth-MiB")
	})
	lines := float64(total / 100)
	b.Run("exp-logs", func(b *testing.B) {
		b.SetBytes(total)
		var growth float64
		start := time.Now()
		for b.Loop() {
			growth = max(growth, peakGrowth(b, pid, func() {
				if r := d.runTo(io.Discard, "exp", "logs", id, "-o", "table"); r.code != 0 {
					b.Fatalf("logs: %d %s", r.code, r.stderr)
				}
			}))
		}
		b.ReportMetric(lines*float64(b.N)/time.Since(start).Seconds(), "lines/s")
		b.ReportMetric(growth, "server-rss-growth-MiB")
	})
	b.Run("logs-export", func(b *testing.B) {
		b.SetBytes(total)
		var growth float64
		start := time.Now()
		for b.Loop() {
			dir := b.TempDir()
			growth = max(growth, peakGrowth(b, pid, func() {
				if r := d.run("", "exp", "logs", "export", id, "--to", "file://"+dir); r.code != 0 {
					b.Fatalf("export: %d %s", r.code, r.stderr)
				}
			}))
			os.RemoveAll(dir)
		}
		b.ReportMetric(lines*float64(b.N)/time.Since(start).Seconds(), "lines/s")
		b.ReportMetric(growth, "server-rss-growth-MiB")
	})
}

// BenchmarkResultsGCS is artifact get against a gs:// bucket, the store of
// production: fake-gcs-server on loopback speaks the real JSON API to the
// real client, both for the server and for the baseline, which copies the
// same objects to local files checking their CRC32C, four at a time (what
// gcloud storage cp does).
func BenchmarkResultsGCS(b *testing.B) {
	total := resultsBytes(b) / 4 // fake-gcs-server holds objects in memory
	gcs := gcstest.Start(b, "", "bench-results")
	d := startDevEnv(b, "", []string{"STORAGE_EMULATOR_HOST=" + strings.TrimPrefix(gcs.URL(), "http://")})
	pid := d.cmd.Process.Pid
	f := filepath.Join(b.TempDir(), "clusters.yaml")
	if err := os.WriteFile(f, []byte("clusters:\n  local-gcs:\n    provider: local\n    gcs_bucket: gs://bench-results\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if r := d.run("", "cluster", "apply", "-f", f); r.code != 0 {
		b.Fatalf("cluster apply: %d %s", r.code, r.stderr)
	}
	exp := d.create("name: gcs-bench\ncluster_name: local-gcs\nrole_to_task_spec:\n  main: {command: 'true', replica: 1}\n")
	id := exp["id"].(string)
	loc, err := blobstore.Parse("artifact", exp["artifact_path"].(string))
	if err != nil || loc.Scheme != "gs" {
		b.Fatalf("artifact path %v: %v", exp["artifact_path"], err)
	}
	o := blobstore.NewOpener(blobstore.WithGCSOptions(gcs.ClientOptions()...))
	defer o.Close()
	ctx := context.Background()
	chunk := make([]byte, 1<<20)
	for i := 1; i <= 8; i++ {
		w, err := o.Writer(ctx, loc, fmt.Sprintf("part-%d.bin", i), "")
		if err != nil {
			b.Fatal(err)
		}
		for n := int64(0); n < total/8; n += int64(len(chunk)) {
			chunk[0], chunk[1] = byte(i), byte(n>>20)
			w.Write(chunk)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if r := d.run("", "exp", "wait", id, "--timeout", "2m"); r.code != 0 {
		b.Fatalf("wait: %d %s", r.code, r.stderr)
	}
	if l := d.ls(id); len(l.Items) != 8 {
		b.Fatalf("ls: %d files", len(l.Items))
	}

	b.Run("plain-copy", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			verifiedCopy(b, o, loc)
		}
	})
	b.Run("artifact-get", func(b *testing.B) {
		b.SetBytes(total)
		var growth float64
		for b.Loop() {
			dir := filepath.Join(b.TempDir(), "out")
			growth = max(growth, peakGrowth(b, pid, func() {
				if r := d.run("", "artifact", "get", id, "--to", dir); r.code != 0 {
					b.Fatalf("get: %d %s", r.code, r.stderr)
				}
			}))
			os.RemoveAll(dir)
		}
		b.ReportMetric(growth, "server-rss-growth-MiB")
	})
}

// verifiedCopy is the baseline of the download benchmarks: what a user does
// without Falcon, copying part-1.bin ... part-8.bin under loc to local files
// and checking each one's CRC32C (as gcloud storage cp does), four at a
// time.
func verifiedCopy(b *testing.B, o *blobstore.Opener, loc blobstore.Location) {
	dir := b.TempDir()
	defer os.RemoveAll(dir)
	var g errgroup.Group
	g.SetLimit(4)
	for i := 1; i <= 8; i++ {
		g.Go(func() error {
			name := fmt.Sprintf("part-%d.bin", i)
			r, _, err := o.Open(context.Background(), loc, name, 0, -1)
			if err != nil {
				return err
			}
			defer r.Close()
			out, err := os.Create(filepath.Join(dir, name))
			if err != nil {
				return err
			}
			h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
			if _, err := io.Copy(io.MultiWriter(out, h), r); err != nil {
				return err
			}
			return out.Close()
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}
