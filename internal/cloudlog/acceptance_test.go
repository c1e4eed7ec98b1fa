package cloudlog_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gax "github.com/googleapis/gax-go/v2"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/falconhq/falcon/internal/cloudlog"
	"github.com/falconhq/falcon/internal/cloudlog/cloudlogtest"
)

// TestAcceptance001 is 001's acceptance table 5 (CloudLogRetriever), one
// case per row, over loopback gRPC to the real client.
func TestAcceptance001(t *testing.T) {
	const perRank = 300
	since := time.Date(2026, 4, 13, 0, 0, 0, 0, time.UTC) // line 60 of each rank
	for _, tc := range []struct {
		name      string // the row of table 5
		criterion string
		run       func(t *testing.T, e *env)
	}{
		{
			name:      "stream rank-0",
			criterion: "stream_log(rank=0) yields rank-0's lines, one at a time, in order",
			run: func(t *testing.T, e *env) {
				var got []cloudlog.Line
				err := e.r.Stream(context.Background(), target, cloudlog.Filter{Ranks: []int{0}}, false, func(l cloudlog.Line) error {
					got = append(got, l)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(expected(0, 0, perRank), texts(got)); diff != "" {
					t.Errorf("rank-0 lines (-want +got):\n%s", diff)
				}
				for _, l := range got {
					if l.Rank != 0 || l.Pod != workload.Pod(0) {
						t.Fatalf("line %+v: want rank 0 of pod %s", l, workload.Pod(0))
					}
				}
				if !slices.IsSortedFunc(got, func(a, b cloudlog.Line) int { return a.Time.Compare(b.Time) }) {
					t.Error("lines are not oldest first")
				}
				if got[0].Time != lineAt(0, 0) {
					t.Errorf("first line's time = %v, want %v", got[0].Time, lineAt(0, 0))
				}
			},
		},
		{
			name:      "grep",
			criterion: `filter.grep="step_time" is applied by Cloud Logging: only matching lines come back`,
			run: func(t *testing.T, e *env) {
				got, err := e.collect(t, cloudlog.Filter{Ranks: []int{0}, Grep: "step_time"})
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for i := 0; i < perRank; i += 10 {
					want = append(want, text(0, i))
				}
				if diff := cmp.Diff(want, texts(got)); diff != "" {
					t.Errorf("grep lines (-want +got):\n%s", diff)
				}
				if served := e.srv.Served(); served != len(want) {
					t.Errorf("the server sent %d entries, want only the %d matching: grep must run on Cloud Logging's side", served, len(want))
				}
			},
		},
		{
			name:      "tail",
			criterion: "filter.tail_lines=100 returns only the last 100 lines",
			run: func(t *testing.T, e *env) {
				got, err := e.collect(t, cloudlog.Filter{Ranks: []int{0}, Tail: 100})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(expected(0, perRank-100, perRank), texts(got)); diff != "" {
					t.Errorf("tail (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:      "since",
			criterion: `filter.since="2026-04-13T00:00:00Z" returns only lines from then on`,
			run: func(t *testing.T, e *env) {
				got, err := e.collect(t, cloudlog.Filter{Ranks: []int{1}, Since: since})
				if err != nil {
					t.Fatal(err)
				}
				// Rank 1's line 60 is 1ms after since, line 59 before it.
				if diff := cmp.Diff(expected(1, 60, perRank), texts(got)); diff != "" {
					t.Errorf("since (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:      "GCS export",
			criterion: "export_logs(gcs_dest=...) writes the log under the given path and returns each rank's URI",
			run: func(t *testing.T, e *env) {
				bucket := openBucket(t)
				res, err := e.r.Export(context.Background(), target, cloudlog.Filter{}, bucket, "profiles/s1/logs")
				if err != nil {
					t.Fatal(err)
				}
				wantURIs := map[int]string{
					0: "gs://falcon-tpu-v5p/profiles/s1/logs/rank-0.log",
					1: "gs://falcon-tpu-v5p/profiles/s1/logs/rank-1.log",
					2: "gs://falcon-tpu-v5p/profiles/s1/logs/rank-2.log",
				}
				if diff := cmp.Diff(wantURIs, res.URIs("gs://falcon-tpu-v5p")); diff != "" {
					t.Errorf("URIs (-want +got):\n%s", diff)
				}
				for rank := range 3 {
					got := readObject(t, bucket, res.Objects[rank])
					if want := strings.Join(expected(rank, 0, perRank), "\n") + "\n"; got != want {
						t.Errorf("rank-%d.log differs from the log (%d bytes, want %d)", rank, len(got), len(want))
					}
				}
				if !exists(t, bucket, "profiles/s1/logs/collection_meta.json") {
					t.Error("collection_meta.json was not written")
				}
			},
		},
		{
			name:      "multi-rank export",
			criterion: "filter.ranks=None exports every rank; filter.ranks=[0] only rank-0",
			run: func(t *testing.T, e *env) {
				all, err := e.r.Export(context.Background(), target, cloudlog.Filter{}, openBucket(t), "all")
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]int{0, 1, 2}, all.ExportedRanks); diff != "" {
					t.Errorf("ranks=None exported (-want +got):\n%s", diff)
				}
				bucket := openBucket(t)
				only, err := e.r.Export(context.Background(), target, cloudlog.Filter{Ranks: []int{0}}, bucket, "only")
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]int{0}, only.ExportedRanks); diff != "" {
					t.Errorf("ranks=[0] exported (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{"only/collection_meta.json", "only/rank-0.log"}, keys(t, bucket)); diff != "" {
					t.Errorf("objects of ranks=[0] (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:      "pod and rank discovery",
			criterion: "the workload's pods and ranks are found through Cloud Logging's labels",
			run: func(t *testing.T, e *env) {
				ranks, err := e.r.Ranks(context.Background(), target, cloudlog.Filter{})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]int{0, 1, 2}, ranks); diff != "" {
					t.Errorf("ranks (-want +got):\n%s", diff)
				}
				got, err := e.collect(t, cloudlog.Filter{})
				if err != nil {
					t.Fatal(err)
				}
				pods := map[int]string{}
				for _, l := range got {
					pods[l.Rank] = l.Pod
				}
				want := map[int]string{0: workload.Pod(0), 1: workload.Pod(1), 2: workload.Pod(2)}
				if diff := cmp.Diff(want, pods); diff != "" {
					t.Errorf("rank -> pod of every line (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:      "API failure",
			criterion: "a Cloud Logging failure raises LogRetrievalError carrying the original error",
			run: func(t *testing.T, e *env) {
				e.srv.Fail(cloudlogtest.ListLogEntries, codes.PermissionDenied, -1)
				_, err := e.collect(t, cloudlog.Filter{Ranks: []int{0}})
				var re *cloudlog.RetrievalError
				if !errors.As(err, &re) {
					t.Fatalf("error = %v (%T), want a *cloudlog.RetrievalError", err, err)
				}
				if re.Kind != cloudlog.KindPermissionDenied || status.Code(err) != codes.PermissionDenied {
					t.Errorf("kind %q, code %v; want permission_denied, PermissionDenied", re.Kind, status.Code(err))
				}
				if !strings.Contains(err.Error(), "cloudlogtest: injected PermissionDenied") {
					t.Errorf("error %q does not carry Cloud Logging's own message", err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Log(tc.criterion)
			e := newEnv(t, cloudlog.WithCallOptions(gax.WithRetry(nil)))
			for rank := range 3 {
				e.srv.Append(rankLines(workload, rank, perRank, false)...)
			}
			e.srv.Append(noise()...)
			tc.run(t, e)
		})
	}
}

func openBucket(t testing.TB) *blob.Bucket {
	t.Helper()
	b, err := fileblob.OpenBucket(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func readObject(t testing.TB, b *blob.Bucket, key string) string {
	t.Helper()
	data, err := b.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return string(data)
}

func exists(t testing.TB, b *blob.Bucket, key string) bool {
	t.Helper()
	ok, err := b.Exists(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// keys lists every object of the bucket.
func keys(t testing.TB, b *blob.Bucket) []string {
	t.Helper()
	var out []string
	it := b.List(nil)
	for {
		obj, err := it.Next(context.Background())
		if err != nil {
			break
		}
		out = append(out, obj.Key)
	}
	slices.Sort(out)
	return out
}
