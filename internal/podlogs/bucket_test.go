package podlogs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/podlogs"
	"github.com/falconhq/falcon/internal/provider/kube/render"
)

// bucketLines are the objects of job-a, by rank, as the log wrapper writes
// them: plain output, no timestamps.
func bucketFixture(t *testing.T) (*blob.Bucket, map[int][]string) {
	t.Helper()
	b, err := fileblob.OpenBucket(t.TempDir(), &fileblob.Options{CreateDir: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := t.Context()
	lines := map[int][]string{
		0: {"rank 0 starts", "", "step_time: 0.41", "rank 0 done"},
		1: {"rank 1 starts", strings.Repeat("y", 1<<20), "step_time: 0.52", "rank 1 done"},
		2: {},
	}
	for i := range 3000 { // 3000 lines of ~100 bytes: past several 64 KiB chunks
		lines[2] = append(lines[2], fmt.Sprintf("rank 2 line %04d %s", i, strings.Repeat("z", 80)))
	}
	put := func(key, data string) {
		if err := b.WriteAll(ctx, key, []byte(data), nil); err != nil {
			t.Fatal(err)
		}
	}
	put(render.LogObject("job-a", 0), strings.Join(lines[0], "\n")+"\n")
	put(render.LogObject("job-a", 1), strings.Join(lines[1], "\n")) // no final newline: the job was cut off
	put(render.LogObject("job-a", 2), strings.Join(lines[2], "\n")+"\n")
	put("logs/job-a/notes.txt", "not a log\n")
	put("logs/job-a/nested/job-a-5.log", "not this job's pod log\n")
	put(render.LogObject("job-ab", 0), "another job's log\n")
	return b, lines
}

type got struct {
	Pod  string
	Rank int
	Text string
}

func readBucket(t *testing.T, b *blob.Bucket, opts podlogs.Options) ([]got, podlogs.Cursor) {
	t.Helper()
	var out []got
	cur := podlogs.Cursor{}
	err := podlogs.FromBucket(t.Context(), b, "job-a", opts, func(l podlogs.Line) error {
		if !l.Time.IsZero() || l.Role != "" {
			t.Errorf("bucket line %+v has a time or role", l)
		}
		out = append(out, got{l.Pod, l.Rank, l.Text})
		cur.Advance(l)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, cur
}

func want(lines map[int][]string, rank int, from, to int) []got {
	var out []got
	for _, s := range lines[rank][from:to] {
		out = append(out, got{fmt.Sprintf("job-a-%d", rank), rank, s})
	}
	return out
}

func TestFromBucket(t *testing.T) {
	b, lines := bucketFixture(t)
	all := func(r int) []got { return want(lines, r, 0, len(lines[r])) }
	cat := func(parts ...[]got) []got {
		var out []got
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		opts podlogs.Options
		want []got
	}{
		{"every rank in order, a 1 MiB line whole, a last line without newline", podlogs.Options{}, cat(all(0), all(1), all(2))},
		{"ranks", podlogs.Options{Ranks: []int{2, 0}}, cat(all(0), all(2))},
		{"tail", podlogs.Options{Tail: 2}, cat(want(lines, 0, 2, 4), want(lines, 1, 2, 4), want(lines, 2, 2998, 3000))},
		{"tail across chunks", podlogs.Options{Tail: 1500, Ranks: []int{2}}, want(lines, 2, 1500, 3000)},
		{"tail longer than the log", podlogs.Options{Tail: 10, Ranks: []int{0}}, all(0)},
		{"follow is the same read", podlogs.Options{Follow: true, Ranks: []int{0}}, all(0)},
		{"grep", podlogs.Options{Grep: `^step_time: [0-9.]+$`}, []got{{"job-a-0", 0, "step_time: 0.41"}, {"job-a-1", 1, "step_time: 0.52"}}},
		{"tail counts matching lines", podlogs.Options{Grep: `line 0[0-9]{3}`, Tail: 3, Ranks: []int{2}}, want(lines, 2, 997, 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := readBucket(t, b, tc.opts)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lines (-want +got):\n%.3000s", diff)
			}
		})
	}

	t.Run("resume after the last line delivered", func(t *testing.T) {
		var first []got
		cur := podlogs.Cursor{}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		stop := errors.New("client went away")
		err := podlogs.FromBucket(ctx, b, "job-a", podlogs.Options{}, func(l podlogs.Line) error {
			if len(first) == 5 {
				return stop
			}
			first = append(first, got{l.Pod, l.Rank, l.Text})
			cur.Advance(l)
			return nil
		})
		if !errors.Is(err, stop) {
			t.Fatalf("FromBucket = %v, want the emit error", err)
		}
		rest, _ := readBucket(t, b, podlogs.Options{Resume: cur})
		// Ranks 0 and 1 resume after their last line; rank 2, never
		// reached, is read whole.
		if diff := cmp.Diff(cat(all(0), all(1), all(2)), append(first, rest...)); diff != "" {
			t.Errorf("first read then resumed read (-want +got):\n%.3000s", diff)
		}
	})

	t.Run("since is refused", func(t *testing.T) {
		err := podlogs.FromBucket(t.Context(), b, "job-a", podlogs.Options{Since: time.Now()}, func(podlogs.Line) error { return nil })
		var fe *errdefs.FieldError
		if !errors.As(err, &fe) || fe.Field != "since" {
			t.Errorf("FromBucket with Since = %v, want a field error naming since", err)
		}
	})

	t.Run("a job without objects", func(t *testing.T) {
		err := podlogs.FromBucket(t.Context(), b, "job-z", podlogs.Options{}, func(l podlogs.Line) error {
			t.Errorf("line %+v", l)
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
}
