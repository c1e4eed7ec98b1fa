package podlogs

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"io"
	"path"
	"slices"
	"strings"

	"gocloud.dev/blob"

	"github.com/falconhq/falcon/internal/errdefs"
)

// tailChunk is how much of an object's end one ranged read fetches while
// looking for the start of its last lines.
const tailChunk = 64 << 10

// LogPrefix is the prefix, in a cluster's bucket, of job jobID's log
// objects: logs/<job_id>/ (render.LogObject names each rank's object in it).
func LogPrefix(jobID string) string { return "logs/" + jobID + "/" }

// Object is the key of one rank's log object, as the task's log wrapper
// writes it (render.LogObject).
func Object(jobID string, rank int) string { return render.LogObject(jobID, rank) }

// FromBucket reads the log objects of Falcon job jobID in bucket, one per pod
// (logs/<job_id>/<pod>.log, the pod named <job>-<rank> as its hostname, or
// <job>-<rank>-<suffix>), in rank order then name, and hands each line to
// emit. The lines have Pod (the object's name without .log), Rank (from that
// name, -1 if it has none), Offset and Text; no Role or Time, which the
// objects do not keep.
//
// Ranks, Tail, Grep and Resume apply as to pod logs; Tail without Grep reads
// only the end of each object (ranged reads back from its end), so a tail of
// a huge log costs what the tail is. Since is refused (errdefs.FieldError
// "since"): the objects hold no timestamps to filter on. Follow is ignored:
// the objects of a job whose pods are gone are complete.
func FromBucket(ctx context.Context, bucket *blob.Bucket, jobID string, opts Options, emit func(Line) error) error {
	o, err := opts.compile()
	if err != nil {
		return err
	}
	if !o.Since.IsZero() {
		return errdefs.Invalid("since", "the log of job %s is read from its bucket objects, which carry no timestamps", jobID)
	}
	prefix := LogPrefix(jobID)
	type object struct {
		key, pod string
		rank     int
		size     int64
	}
	var objs []object
	it := bucket.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, err)
		}
		name, ok := strings.CutSuffix(path.Base(obj.Key), ".log")
		if obj.IsDir || !ok || name == "" {
			continue
		}
		if rank := nameRank(name, jobID); o.wantRank(rank) {
			objs = append(objs, object{key: obj.Key, pod: name, rank: rank, size: obj.Size})
		}
	}
	slices.SortFunc(objs, func(a, b object) int { return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.pod, b.pod)) })
	for _, obj := range objs {
		r := &objectReader{bucket: bucket, o: o, key: obj.key, pod: obj.pod, rank: obj.rank, size: obj.size}
		if err := r.read(ctx, emit); err != nil {
			return fmt.Errorf("log object %s: %w", obj.key, err)
		}
	}
	return nil
}

type objectReader struct {
	bucket   *blob.Bucket
	o        *compiled
	key, pod string
	rank     int
	size     int64
}

func (r *objectReader) read(ctx context.Context, emit func(Line) error) error {
	pos, resumed := r.o.Resume[r.pod]
	switch {
	case resumed:
		return r.scan(ctx, pos.Offset, r.deliverTo(emit))
	case r.o.Tail > 0 && r.o.grep != nil:
		ring := newRing(r.o.Tail)
		if err := r.scan(ctx, 0, func(l Line) error {
			if r.o.match(l.Text) {
				ring.add(l)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, l := range ring.lines() {
			if err := emit(l); err != nil {
				return err
			}
		}
		return nil
	case r.o.Tail > 0:
		start, err := r.tailStart(ctx, r.o.Tail)
		if err != nil {
			return err
		}
		return r.scan(ctx, start, emit)
	default:
		return r.scan(ctx, 0, r.deliverTo(emit))
	}
}

func (r *objectReader) deliverTo(emit func(Line) error) func(Line) error {
	return func(l Line) error {
		if !r.o.match(l.Text) {
			return nil
		}
		return emit(l)
	}
}

// scan reads the object from offset start to its end, line by line.
func (r *objectReader) scan(ctx context.Context, start int64, fn func(Line) error) error {
	if start >= r.size {
		return nil
	}
	rd, err := r.bucket.NewRangeReader(ctx, r.key, start, -1, nil)
	if err != nil {
		return err
	}
	defer rd.Close()
	br := bufio.NewReaderSize(rd, 64<<10)
	off := start
	for {
		raw, err := br.ReadBytes('\n')
		if len(raw) > 0 && (err == nil || err == io.EOF) {
			off += int64(len(raw))
			if ferr := fn(Line{Pod: r.pod, Rank: r.rank, Offset: off, Text: string(trimEOL(raw))}); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// tailStart returns the offset where the last n lines of the object begin,
// reading back from its end a chunk at a time. A final newline ends the last
// line rather than starting an empty one.
func (r *objectReader) tailStart(ctx context.Context, n int) (int64, error) {
	end := r.size
	if end == 0 {
		return 0, nil
	}
	last, err := r.bucket.NewRangeReader(ctx, r.key, end-1, 1, nil)
	if err != nil {
		return 0, err
	}
	b, err := io.ReadAll(last)
	last.Close()
	if err != nil {
		return 0, err
	}
	if bytes.Equal(b, []byte("\n")) {
		end-- // the last line's own newline
	}
	found := 0
	buf := make([]byte, tailChunk)
	for end > 0 {
		from := max(end-tailChunk, 0)
		chunk := buf[:end-from]
		rd, err := r.bucket.NewRangeReader(ctx, r.key, from, end-from, nil)
		if err != nil {
			return 0, err
		}
		_, err = io.ReadFull(rd, chunk)
		rd.Close()
		if err != nil {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] == '\n' {
				if found++; found == n {
					return from + int64(i) + 1, nil
				}
			}
		}
		end = from
	}
	return 0, nil
}
