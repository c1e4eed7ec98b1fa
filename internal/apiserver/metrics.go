package apiserver

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/changefeed"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/podlogs"
	"github.com/falconhq/falcon/internal/store"
)

// metricsFile is where a job writes metrics, in its artifact dir.
const metricsFile = "metrics.jsonl"

// GetExpMetrics summarises the experiment's metrics, reading what is new
// in its sources first.
func (s *Server) GetExpMetrics(ctx context.Context, req *falconv1.GetExpMetricsRequest) (*falconv1.ExpMetrics, error) {
	if err := checkID("id", ids.Experiment, req.GetId()); err != nil {
		return nil, err
	}
	exp, err := s.store.GetExp(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	c, err := s.placedOn(ctx, exp)
	if err != nil {
		return nil, err
	}
	settled, _ := s.settled(exp, c.Backend)
	if err := s.metrics.Refresh(ctx, exp, settled); err != nil {
		return nil, err
	}
	res, err := s.metrics.Summary(ctx, exp, req.GetSeries())
	if err != nil {
		return nil, err
	}
	out := &falconv1.ExpMetrics{SkippedLines: clamp32(res.Skipped), Conflicts: res.Report.Conflicts, Metrics: []*falconv1.MetricSummary{}}
	for _, m := range res.Report.Metrics {
		out.Metrics = append(out.Metrics, &falconv1.MetricSummary{
			Name: m.Name, Count: clamp32(m.Count), First: m.First, Last: m.Last, Min: m.Min, Max: m.Max,
			Mean: m.Mean, Median: m.Median, Better: m.Better, Source: string(m.Source),
		})
	}
	for _, name := range req.GetSeries() {
		ser := &falconv1.MetricSeries{Name: name}
		for _, p := range res.Series[name] {
			ser.Points = append(ser.Points, &falconv1.MetricPoint{Step: p.Step, Value: p.Value})
		}
		out.Series = append(out.Series, ser)
	}
	return out, nil
}

func clamp32(n int64) int32 { return int32(min(n, math.MaxInt32)) }

// resultSources gives metricsync the server's view of a job's outputs.
type resultSources struct{ s *Server }

func (r resultSources) MetricsFile(ctx context.Context, exp *store.Experiment, offset int64) (io.ReadCloser, error) {
	f, err := r.s.experimentFiles(ctx, exp.ID)
	if err != nil {
		return nil, err
	}
	rd, _, err := r.s.blobs.Open(ctx, f.loc, metricsFile, offset, -1)
	if err != nil {
		return nil, err
	}
	return rd, nil
}

// RankLog opens rank 0's log of the role's job: the file falcon dev
// writes, else the object the cluster's pods leave in its bucket
// (logs/<job_id>/<pod>.log, 000 section 7).
func (r resultSources) RankLog(ctx context.Context, exp *store.Experiment, role string, offset int64) (io.ReadCloser, error) {
	jobs, err := r.s.allJobs(ctx, store.JobFilter{ExpID: exp.ID})
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(jobs, func(j *store.Job) bool { return j.Role == role })
	if i < 0 {
		return nil, errdefs.NotFoundf("experiment %s has no job of role %s", exp.ID, role)
	}
	job := jobs[i]
	if r.s.logDir != "" {
		f, err := os.Open(filepath.Join(r.s.logDir, job.ID, job.ID+"-0.log"))
		if err == nil {
			if _, err := f.Seek(offset, io.SeekStart); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
	}
	bucket, err := r.s.jobBucket(ctx, exp)
	if err != nil || bucket == "" {
		return nil, errdefs.NotFoundf("no log of rank 0 of job %s", job.ID)
	}
	// The object the task's log wrapper writes for rank 0; missing is
	// NotFound, which metricsync reads as "nothing yet".
	rd, _, err := r.s.blobs.Open(ctx, blobstore.Location{Scheme: "gs", Bucket: bucket}, podlogs.Object(job.ID, 0), offset, -1)
	return rd, err
}

// specCopy is the copy of the experiment as submitted that Falcon keeps
// beside its files, so a downloaded artifact says what produced it.
const specCopy = blobstore.HiddenDir + "/experiment.json"

// ensureSpecCopy writes specCopy once per artifact; it is Falcon's own
// file, listed only with --all and not counted as kept.
func (s *Server) ensureSpecCopy(ctx context.Context, f *experimentFiles) error {
	if _, done := s.copied.Load(f.art.ID); done {
		return nil
	}
	b, err := s.blobs.Bucket(ctx, f.loc)
	if err != nil {
		return err
	}
	if ok, err := b.Exists(ctx, f.loc.Prefix+specCopy); err != nil || ok {
		if ok {
			s.copied.Store(f.art.ID, struct{}{})
		}
		return err
	}
	spec := expToAPI(f.exp)
	spec.Jobs, spec.Artifact = nil, nil
	doc, err := protojson.MarshalOptions{UseProtoNames: true, Indent: "  "}.Marshal(spec)
	if err != nil {
		return err
	}
	w, err := s.blobs.Writer(ctx, f.loc, specCopy, "application/json")
	if err != nil {
		return err
	}
	if _, err := w.Write(doc); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	s.copied.Store(f.art.ID, struct{}{})
	return nil
}

// DefaultResultsEvery is how often the server refreshes the artifact
// index and metrics of running experiments, so `exp get` and queries see
// them without anyone asking first. Each refresh lists the artifact's
// prefix, so this is a cost per running experiment; `ls` and `exp metrics`
// refresh on demand anyway.
const DefaultResultsEvery = 15 * time.Second

// WithResultsEvery sets keepResults' round; 0 keeps DefaultResultsEvery.
func WithResultsEvery(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.resultsEvery = d
		}
	}
}

// keepResults keeps experiments' results read without anyone asking: every
// round (WithResultsEvery) those of the experiments that run; the files of
// each experiment as soon as a write through this server ends it (a change
// marked Ended on the feed; see atEnd), so `exp get` says what a run of a
// few seconds kept the moment it ends; and everything once more, final,
// when it settles (see settled) if it had not yet. An experiment that ended while this server
// was down or its feed overflowed, or through another replica that was,
// is read from the round after it was last seen running, or by the next
// `ls` or `metrics` call.
func (s *Server) keepResults(ctx context.Context) {
	t := time.NewTicker(s.resultsEvery)
	defer t.Stop()
	wake, stop := s.feed.Subscribe()
	defer stop()
	seen := s.feed.Latest()
	running := map[string]bool{}
	settling := map[string]time.Time{} // ended, not settled: when it will
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	read := func(id string, what reading) {
		e, err := s.store.GetExp(ctx, id)
		if err != nil {
			delete(settling, id) // deleted since, or read again next round
			return
		}
		if at := s.refreshResults(ctx, e, what); at.IsZero() {
			delete(settling, id)
		} else {
			settling[id] = at
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
			changes, whole := s.feed.Since(seen)
			if len(changes) > 0 {
				seen = changes[len(changes)-1].Seq
			}
			if !whole {
				seen = s.feed.Latest()
				s.log.Warn("changes were dropped before their experiments' results were read; the next round reads those it saw running")
			}
			for _, id := range endedIn(changes) {
				read(id, atEnd)
			}
		case <-t.C:
			now := s.refreshRunning(ctx)
			for id := range running {
				if !now[id] {
					read(id, everything) // ended since the last round
				}
			}
			running = now
		case <-due.C:
			now := s.now()
			for id, at := range settling {
				if !now.Before(at) {
					read(id, everything)
				}
			}
		}
		if next, ok := earliest(settling); ok {
			due.Reset(next.Sub(s.now()))
		}
	}
}

// endedIn lists, once each and in order, the experiments that changes
// marked Ended.
func endedIn(changes []changefeed.Change) []string {
	var out []string
	for _, c := range changes {
		if c.Ended && !slices.Contains(out, c.ID) {
			out = append(out, c.ID)
		}
	}
	return out
}

// earliest is the soonest of the times in m.
func earliest(m map[string]time.Time) (time.Time, bool) {
	var first time.Time
	for _, at := range m {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// refreshRunning reads the results of the experiments that run now and
// returns them.
func (s *Server) refreshRunning(ctx context.Context) map[string]bool {
	now := map[string]bool{}
	for _, st := range []lifecycle.Status{lifecycle.Running, lifecycle.Aborting} {
		for page := (store.ExpFilter{Status: st, Page: store.Page{Size: 1000}}); ; {
			exps, next, err := s.store.ListExps(ctx, page)
			if err != nil {
				break
			}
			for _, e := range exps {
				now[e.ID] = true
				s.refreshResults(ctx, e, everything)
			}
			if next == "" {
				break
			}
			page.Token = next
		}
	}
	return now
}

// reading says how much of an experiment's results refreshResults reads.
type reading int

const (
	// everything: its files and its metrics.
	everything reading = iota
	// atEnd: its files, the moment it ended, where its jobs could write
	// them. That is what `exp get` shows; metrics are read when asked for
	// and by the rounds, as while it ran. On a cluster that is not this
	// machine's, whose files are on the server's own disk (no bucket), no
	// job could write any: reading there at every end only made the
	// directories for Falcon's copy of the spec, a tenth of a busy falcon
	// dev's CPU in BenchmarkKubeDispatch.
	atEnd
)

// refreshResults reads what is new of the experiment's results (what
// says how much), and returns when they settle if it ended and they have
// not yet (zero otherwise).
func (s *Server) refreshResults(ctx context.Context, exp *store.Experiment, what reading) time.Time {
	f, err := s.filesOf(ctx, exp)
	if err != nil {
		s.log.Warn("experiment's files not read", "exp", exp.ID, "err", err)
		return time.Time{}
	}
	if what == atEnd && f.loc.Scheme == "file" && f.backend != localBackend {
		return time.Time{}
	}
	settled, at := s.settled(exp, f.backend)
	if err := s.ensureSpecCopy(ctx, f); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("copy of the experiment's spec not written", "exp", exp.ID, "err", err)
	}
	if err := s.refreshIndex(ctx, f); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("artifact index refresh failed", "exp", exp.ID, "err", err)
	}
	if what == everything {
		if err := s.metrics.Refresh(ctx, exp, settled); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("metric extraction failed", "exp", exp.ID, "err", err)
		}
	}
	if settled {
		return time.Time{}
	}
	return at
}
