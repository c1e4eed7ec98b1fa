package cloudlog_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/logging/apiv2/loggingpb"
	"github.com/google/go-cmp/cmp"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"

	"github.com/falconhq/falcon/internal/cloudlog"
	"github.com/falconhq/falcon/internal/cloudlog/cloudlogtest"
)

var exportedAt = time.Date(2026, 4, 14, 8, 30, 0, 0, time.UTC)

func TestExportWritesEachRankAndTheMeta(t *testing.T) {
	e := newEnv(t, cloudlog.WithClock(func() time.Time { return exportedAt }), cloudlog.WithPageSize(4))
	e.srv.Append(rankLines(workload, 0, 10, false)...)
	e.srv.Append(rankLines(workload, 2, 3, true)...) // found by pod name
	e.srv.Append(
		workload.JSONEntry(workload.Pod(2), 2, lineAt(2, 3), "json line"),
		workload.Entry(workload.Pod(2), 2, lineAt(2, 4), "Traceback:\n  File \"x.py\"\nValueError: ünïcode"),
	)
	e.srv.Append(noise()...)
	bucket := openBucket(t)

	res, err := e.r.Export(context.Background(), target, cloudlog.Filter{}, bucket, "/profiles/s1/logs/")
	if err != nil {
		t.Fatal(err)
	}
	rank0 := strings.Join(expected(0, 0, 10), "\n") + "\n"
	rank2 := strings.Join(expected(2, 0, 3), "\n") + "\njson line\nTraceback:\n  File \"x.py\"\nValueError: ünïcode\n"
	filter, _ := cloudlog.BuildFilter(target, cloudlog.Filter{})
	want := &cloudlog.ExportResult{
		WorkloadName: target.Workload, Cluster: target.Cluster, Project: target.Project, Location: target.Location, Namespace: target.Namespace,
		Filter:        filter,
		ExportedRanks: []int{0, 2},
		Objects:       map[int]string{0: "profiles/s1/logs/rank-0.log", 2: "profiles/s1/logs/rank-2.log"},
		LineCounts:    map[int]int64{0: 10, 2: 5},
		ByteCounts:    map[int]int64{0: int64(len(rank0)), 2: int64(len(rank2))},
		MetaObject:    "profiles/s1/logs/collection_meta.json",
		ExportedAt:    exportedAt,
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if got := readObject(t, bucket, "profiles/s1/logs/rank-0.log"); got != rank0 {
		t.Errorf("rank-0.log:\n%q\nwant\n%q", got, rank0)
	}
	if got := readObject(t, bucket, "profiles/s1/logs/rank-2.log"); got != rank2 {
		t.Errorf("rank-2.log:\n%q\nwant\n%q", got, rank2)
	}
	var meta cloudlog.ExportResult
	if err := json.Unmarshal([]byte(readObject(t, bucket, res.MetaObject)), &meta); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, &meta); diff != "" {
		t.Errorf("collection_meta.json (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"profiles/s1/logs/collection_meta.json", "profiles/s1/logs/rank-0.log", "profiles/s1/logs/rank-2.log"}, keys(t, bucket)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	// The JSON a caller and collection_meta.json readers see uses 001's names.
	raw := readObject(t, bucket, res.MetaObject)
	for _, k := range []string{`"workload_name"`, `"exported_ranks"`, `"line_counts"`, `"exported_at": "2026-04-14T08:30:00Z"`} {
		if !strings.Contains(raw, k) {
			t.Errorf("collection_meta.json lacks %s:\n%s", k, raw)
		}
	}
}

func TestExportTail(t *testing.T) {
	e := newEnv(t)
	for rank := range 2 {
		e.srv.Append(rankLines(workload, rank, 50, false)...)
	}
	bucket := openBucket(t)
	res, err := e.r.Export(context.Background(), target, cloudlog.Filter{Tail: 2}, bucket, "t")
	if err != nil {
		t.Fatal(err)
	}
	for rank := range 2 {
		if got, want := readObject(t, bucket, res.Objects[rank]), text(rank, 48)+"\n"+text(rank, 49)+"\n"; got != want {
			t.Errorf("rank %d: %q, want %q", rank, got, want)
		}
	}
	if res.TailLines != 2 {
		t.Errorf("tail_lines = %d, want 2", res.TailLines)
	}
}

// A rank whose listing fails halfway is marked missing with the reason and
// its object is not written at all; the other ranks are exported.
func TestExportMarksAFailedRankMissing(t *testing.T) {
	e := newEnv(t, cloudlog.WithPageSize(500), cloudlog.WithCallOptions(gax.WithRetry(nil)))
	long := strings.Repeat("x", 1000)
	for rank := range 3 {
		for i := range 600 {
			e.srv.Append(workload.Entry(workload.Pod(rank), rank, lineAt(rank, i), fmt.Sprintf("%d %s", i, long)))
		}
	}
	// Rank 0's first page (500 KB, more than the export's write buffer)
	// reaches the bucket's writer; its second page is refused.
	var calls atomic.Int32
	e.srv.OnList(func(*loggingpb.ListLogEntriesRequest) {
		if calls.Add(1) == 1 {
			e.srv.Fail(cloudlogtest.ListLogEntries, codes.PermissionDenied, 1)
		}
	})
	bucket := openBucket(t)
	res, err := e.r.Export(context.Background(), target, cloudlog.Filter{Ranks: []int{0, 1, 2}}, bucket, "p")

	var re *cloudlog.RetrievalError
	if !errors.As(err, &re) || re.Rank != 0 || re.Op != "export" || re.Kind != cloudlog.KindPermissionDenied {
		t.Fatalf("error = %v, want rank 0's permission-denied RetrievalError", err)
	}
	if res == nil {
		t.Fatal("no result")
	}
	if diff := cmp.Diff([]int{1, 2}, res.ExportedRanks); diff != "" {
		t.Errorf("exported ranks (-want +got):\n%s", diff)
	}
	if !strings.Contains(res.MissingRanks[0], "roles/logging.viewer") {
		t.Errorf("missing_ranks[0] = %q, want the reason", res.MissingRanks[0])
	}
	if diff := cmp.Diff([]string{"p/collection_meta.json", "p/rank-1.log", "p/rank-2.log"}, keys(t, bucket)); diff != "" {
		t.Errorf("objects (-want +got); a failed rank must leave no partial object:\n%s", diff)
	}
	if !strings.Contains(readObject(t, bucket, "p/collection_meta.json"), `"missing_ranks"`) {
		t.Error("collection_meta.json does not list the missing rank")
	}
}

func TestExportRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	if _, err := e.r.Export(context.Background(), target, cloudlog.Filter{Grep: "("}, openBucket(t), "p"); err == nil || !strings.HasPrefix(err.Error(), "grep: ") {
		t.Errorf("error = %v, want one naming grep", err)
	}
	if _, err := e.r.Export(context.Background(), target, cloudlog.Filter{}, nil, "p"); err == nil {
		t.Error("no error without a bucket")
	}
	if n := e.srv.Calls(cloudlogtest.ListLogEntries); n != 0 {
		t.Errorf("%d calls to Cloud Logging for bad input, want none", n)
	}
}

// A rank of about 50 MB goes to the bucket without the export's memory
// growing with it.
func TestExportLargeRankInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("50 MB export")
	}
	const lines, width = 50_000, 1000
	e := newEnv(t)
	h := sha256.New()
	batch := make([]*loggingpb.LogEntry, 0, 1000)
	for i := range lines {
		s := fmt.Sprintf("%08d ", i) + strings.Repeat(string(rune('a'+i%26)), width-9)
		fmt.Fprintln(h, s)
		batch = append(batch, workload.Entry(workload.Pod(0), 0, t0.Add(time.Duration(i)*time.Millisecond), s))
		if len(batch) == cap(batch) {
			e.srv.Append(batch...)
			batch = make([]*loggingpb.LogEntry, 0, 1000)
		}
	}
	wantSum := fmt.Sprintf("%x", h.Sum(nil))
	bucket := openBucket(t)

	// Garbage is collected early so that the heap measures what is live.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	base, peak := heapInuse(), uint64(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, heapInuse())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	res, err := e.r.Export(context.Background(), target, cloudlog.Filter{Ranks: []int{0}}, bucket, "big")
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.ByteCounts[0] != lines*(width+1) {
		t.Errorf("wrote %d bytes, want %d", res.ByteCounts[0], lines*(width+1))
	}
	r, err := bucket.NewReader(context.Background(), "big/rank-0.log", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h.Reset()
	if _, err := r.WriteTo(h); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != wantSum {
		t.Errorf("rank-0.log's sha256 %s, want %s", got, wantSum)
	}
	grew := int64(peak) - int64(base)
	t.Logf("exported %d MB; heap in use grew by at most %.1f MiB", res.ByteCounts[0]>>20, float64(grew)/(1<<20))
	if grew > 40<<20 {
		t.Errorf("heap in use grew by %.1f MiB while exporting %d MB: the export holds the log in memory", float64(grew)/(1<<20), res.ByteCounts[0]>>20)
	}
}

func heapInuse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkExport reports the export's throughput from the fake over
// loopback gRPC into fileblob.
func BenchmarkExport(b *testing.B) {
	const lines = 20_000
	e := newEnv(b)
	line := strings.Repeat("y", 199)
	batch := make([]*loggingpb.LogEntry, lines)
	for i := range batch {
		batch[i] = workload.Entry(workload.Pod(0), 0, t0.Add(time.Duration(i)*time.Millisecond), line)
	}
	e.srv.Append(batch...)
	bucket := openBucket(b)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := e.r.Export(context.Background(), target, cloudlog.Filter{Ranks: []int{0}}, bucket, fmt.Sprint(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(lines*b.N)/b.Elapsed().Seconds(), "lines/s")
	b.ReportMetric(float64(lines*200*b.N)/b.Elapsed().Seconds()/(1<<20), "MiB/s")
}
