package cloudlog

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"path"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/logging/apiv2/loggingpb"
	"gocloud.dev/blob"
)

// MetaObject is the name of the object an export writes last, beside the
// rank objects: its presence means every rank object it names is complete.
const MetaObject = "collection_meta.json"

// ExportResult is 001's LogExportResult, and the content of
// collection_meta.json.
type ExportResult struct {
	WorkloadName string `json:"workload_name"`
	Cluster      string `json:"cluster"`
	Project      string `json:"project"`
	Location     string `json:"location,omitempty"`
	Namespace    string `json:"namespace"`
	// Filter is the Cloud Logging filter of the export; each rank's query
	// adds its rank to it.
	Filter    string `json:"filter"`
	TailLines int    `json:"tail_lines,omitempty"`
	// ExportedRanks are the ranks whose object was written, ascending.
	ExportedRanks []int `json:"exported_ranks"`
	// Objects maps each exported rank to its object's key in the bucket
	// (<prefix>/rank-<N>.log); URIs turns them into gs:// URIs.
	Objects    map[int]string `json:"objects"`
	LineCounts map[int]int64  `json:"line_counts"`
	ByteCounts map[int]int64  `json:"byte_counts"`
	// MissingRanks maps each rank that could not be exported to the reason:
	// 001's "log marked missing". Its object was not written at all, never
	// written in part.
	MissingRanks map[int]string `json:"missing_ranks,omitempty"`
	MetaObject   string         `json:"meta_object"`
	ExportedAt   time.Time      `json:"exported_at"`
}

// URIs are the exported objects' URIs (001's gcs_uris) in the bucket whose
// URL is bucketURL, such as "gs://falcon-logs".
func (r *ExportResult) URIs(bucketURL string) map[int]string {
	out := make(map[int]string, len(r.Objects))
	for rank, key := range r.Objects {
		out[rank] = strings.TrimSuffix(bucketURL, "/") + "/" + key
	}
	return out
}

// Export writes f's lines of t to bucket, one object per rank,
// <prefix>/rank-<N>.log with a line per entry, and then
// <prefix>/collection_meta.json with the result. f.Ranks nil exports every
// rank Ranks finds; a rank asked for by f.Ranks that has no lines gets an
// empty object.
//
// Lines go from Cloud Logging to the bucket's writer a page at a time, one
// rank after another: no local disk, and memory bounded by a page and the
// bucket driver's upload buffer (gcsblob's is 16 MiB), whatever the size of
// the log. With f.Tail, a rank's last f.Tail lines are held before writing.
//
// A rank that fails is left out and listed in MissingRanks; Export goes on
// with the others and returns the result with an error joining each
// rank's *RetrievalError. A nil result means nothing was exported: bad
// input, rank discovery failed, or ctx ended.
func (r *Retriever) Export(ctx context.Context, t Target, f Filter, bucket *blob.Bucket, prefix string) (*ExportResult, error) {
	filter, err := BuildFilter(t, f)
	if err != nil {
		return nil, err
	}
	if bucket == nil {
		return nil, errors.New("cloudlog: Export needs a bucket")
	}
	ranks, err := r.selectedRanks(ctx, t, f)
	if err != nil {
		return nil, err
	}
	prefix = strings.Trim(prefix, "/")
	res := &ExportResult{
		WorkloadName: t.Workload, Cluster: t.Cluster, Project: t.Project, Location: t.Location, Namespace: t.Namespace,
		Filter: filter, TailLines: f.Tail,
		ExportedRanks: []int{},
		Objects:       map[int]string{}, LineCounts: map[int]int64{}, ByteCounts: map[int]int64{},
		MetaObject: path.Join(prefix, MetaObject),
	}
	var errs []error
	for _, rank := range ranks {
		key := path.Join(prefix, "rank-"+strconv.Itoa(rank)+".log")
		lines, n, err := r.exportRank(ctx, t, f, rank, bucket, key)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			if res.MissingRanks == nil {
				res.MissingRanks = map[int]string{}
			}
			res.MissingRanks[rank] = err.Error()
			errs = append(errs, err)
			continue
		}
		res.ExportedRanks = append(res.ExportedRanks, rank)
		res.Objects[rank] = key
		res.LineCounts[rank] = lines
		res.ByteCounts[rank] = n
	}
	res.ExportedAt = r.now().UTC()
	meta, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := bucket.WriteAll(ctx, res.MetaObject, append(meta, '\n'), &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		errs = append(errs, storageError(ctx, t.Project, -1, err))
	}
	return res, errors.Join(errs...)
}

// exportRank streams one rank's lines into key. On any failure it aborts
// the write, so that no object passes for a complete log that is not.
func (r *Retriever) exportRank(ctx context.Context, t Target, f Filter, rank int, bucket *blob.Bucket, key string) (lines, n int64, err error) {
	one := f
	one.Ranks = []int{rank}
	filter, err := BuildFilter(t, one)
	if err != nil {
		return 0, 0, err
	}
	// Canceling the writer's context before Close aborts the upload.
	wctx, abort := context.WithCancel(ctx)
	defer abort()
	w, err := bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "text/plain; charset=utf-8"})
	if err != nil {
		return 0, 0, storageError(ctx, t.Project, rank, err)
	}
	// Lines are short; without a buffer a driver such as fileblob makes a
	// system call for each.
	bw := bufio.NewWriterSize(w, 256<<10)
	var werr error
	write := func(l Line) error {
		m, err := bw.WriteString(l.Text)
		if err == nil {
			err = bw.WriteByte('\n')
		}
		if err != nil {
			werr = err
			return err
		}
		lines++
		n += int64(m) + 1
		return nil
	}
	if f.Tail > 0 {
		var last []Line
		if last, err = r.lastLines(ctx, t, f, rank); err == nil {
			for _, l := range last {
				if err = write(l); err != nil {
					break
				}
			}
		}
	} else {
		err = r.list(ctx, t, "export", rank, filter, false, r.pageSize, func(e *loggingpb.LogEntry) error {
			return write(toLine(t.Workload, e))
		})
	}
	if err == nil {
		werr = bw.Flush()
	}
	if err != nil || werr != nil {
		abort()
		_ = w.Close()
		if werr != nil {
			return 0, 0, storageError(ctx, t.Project, rank, werr)
		}
		var re *RetrievalError
		if errors.As(err, &re) {
			re.Op, re.Rank = "export", rank
		}
		return 0, 0, err
	}
	if err := w.Close(); err != nil {
		return 0, 0, storageError(ctx, t.Project, rank, err)
	}
	return lines, n, nil
}
