package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/logtime"
	"github.com/falconhq/falcon/internal/podlogs"
	"github.com/falconhq/falcon/internal/store"
)

// exportMeta is the object that describes an export, written last, as 001
// names it.
const exportMeta = "collection_meta.json"

// ExportExpLogs writes every rank's log to <to>/<role>-rank-<N>.log and the
// result to <to>/collection_meta.json, streaming: each rank goes from its
// source to the bucket through one writer, never through memory or disk
// as a whole. A rank whose log cannot be read is marked missing with the
// reason and its object is not written; the others are still exported.
func (s *Server) ExportExpLogs(ctx context.Context, req *falconv1.ExportExpLogsRequest) (*falconv1.LogExportResult, error) {
	if err := checkID("id", ids.Experiment, req.GetId()); err != nil {
		return nil, err
	}
	dest, err := blobstore.Parse("to", req.GetTo())
	if err != nil {
		return nil, err
	}
	if dest.Scheme == "file" && s.artifactRoot.Scheme != "file" {
		return nil, errdefs.Invalid("to", "%q: this server exports to gs:// buckets only (file:// would write on the server's own disk)", req.GetTo())
	}
	var grep *regexp.Regexp
	if g := req.GetGrep(); g != "" {
		if grep, err = regexp.Compile(g); err != nil {
			return nil, errdefs.Invalid("grep", "%q is not an RE2 expression: %v", g, err)
		}
	}
	if _, err := s.store.GetExp(ctx, req.GetId()); err != nil {
		return nil, err
	}
	jobs, err := s.allJobs(ctx, store.JobFilter{ExpID: req.GetId()})
	if err != nil {
		return nil, err
	}
	if jobs, err = jobsOfRole(req.GetId(), req.GetRole(), jobs); err != nil {
		return nil, err
	}
	local, _, err := s.splitByBackend(ctx, jobs)
	if err != nil {
		return nil, err
	}
	isLocal := map[string]bool{}
	for _, j := range local {
		isLocal[j.ID] = true
	}

	res := &falconv1.LogExportResult{Destination: dest.String()}
	for _, j := range jobs {
		for rank := range max(int(j.TaskSpec.Ranks()), 1) {
			key := fmt.Sprintf("%s-rank-%d.log", j.Role, rank)
			re := &falconv1.RankExport{Role: j.Role, Rank: int32(rank)}
			lines, n, err := s.exportRank(ctx, dest, key, j, rank, isLocal[j.ID], grep, req)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				re.Missing = err.Error()
			} else {
				re.Object, re.Lines, re.Bytes = dest.String()+key, lines, n
				res.TotalLines += lines
				res.TotalBytes += n
			}
			res.Ranks = append(res.Ranks, re)
		}
	}
	meta, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true, Indent: "  "}.Marshal(res)
	if err != nil {
		return nil, err
	}
	w, err := s.blobs.Writer(ctx, dest, exportMeta, "application/json")
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(meta); err != nil {
		w.Close()
		return nil, blobstore.Err(exportMeta, err)
	}
	if err := w.Close(); err != nil {
		return nil, blobstore.Err(exportMeta, err)
	}
	res.MetaObject = dest.String() + exportMeta
	return res, nil
}

// exportRank streams one rank's log into key under dest. On any error the
// object is abandoned (its writer's context is cancelled before Close), so
// no half-written log is left under a rank's name.
func (s *Server) exportRank(ctx context.Context, dest blobstore.Location, key string, j *store.Job, rank int, local bool, grep *regexp.Regexp, req *falconv1.ExportExpLogsRequest) (lines, n int64, err error) {
	wctx, abandon := context.WithCancel(ctx)
	defer abandon()
	w, err := s.blobs.Writer(wctx, dest, key, "text/plain; charset=utf-8")
	if err != nil {
		return 0, 0, err
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	cw := &countingWriter{w: bw}
	if local {
		err = s.copyLocalLog(ctx, cw, j, rank, grep, optTime(req.GetSince()))
	} else {
		opts := podlogs.Options{Ranks: []int{rank}, Grep: req.GetGrep()}
		if req.GetSince() != nil {
			opts.Since = req.GetSince().AsTime()
		}
		err = s.jobLogs(ctx, j, opts, func(l podlogs.Line) error {
			if _, err := io.WriteString(cw, l.Text); err != nil {
				return err
			}
			_, err := cw.Write([]byte{'\n'})
			return err
		})
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		abandon()
		_ = w.Close()
		return 0, 0, err
	}
	if err := w.Close(); err != nil {
		return 0, 0, blobstore.Err(key, err)
	}
	return cw.lines, cw.n, nil
}

// copyLocalLog copies falcon dev's file of one rank, whole or the lines
// matching grep and written at or after since (a line the log's index
// does not date is kept, as in exp logs).
func (s *Server) copyLocalLog(ctx context.Context, w io.Writer, j *store.Job, rank int, grep *regexp.Regexp, since *time.Time) error {
	path := filepath.Join(s.logDir, j.ID, fmt.Sprintf("%s-%d.log", j.ID, rank))
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return errdefs.NotFoundf("rank %d of role %s has no log (it has not started, or wrote nothing)", rank, j.Role)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if grep == nil && since == nil {
		_, err := io.Copy(w, readerCtx{ctx, f})
		return err
	}
	var times *logtime.Reader // only --since needs the lines' times
	if since != nil {
		if times, err = logtime.Open(path); err != nil {
			return err
		}
		defer times.Close()
	}
	keep := func(line []byte, end int64) bool {
		if grep != nil && !grep.Match(bytes.TrimSuffix(line, []byte("\n"))) {
			return false
		}
		if since == nil {
			return true
		}
		at, dated := times.At(end)
		return !dated || !at.Before(*since)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	var end int64
	for {
		line, err := r.ReadBytes('\n')
		end += int64(len(line))
		if len(line) > 0 && keep(line, end) {
			if !bytes.HasSuffix(line, []byte("\n")) {
				line = append(line, '\n')
			}
			if _, werr := w.Write(line); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

type countingWriter struct {
	w        io.Writer
	n, lines int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.lines += int64(bytes.Count(p[:n], []byte{'\n'}))
	return n, err
}

// readerCtx stops a copy when the caller goes away.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
