package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/accuracy"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/controller/watch"
)

// Result is what one analysis produced: its headline figures for the
// database, the full result for report.json and its Markdown rendering.
type Result struct {
	Summary  any
	Report   any
	Markdown string
}

// RunTimeout bounds one analysis: under the API server's 10 minutes after
// which a claim is stale and given to another controller.
const RunTimeout = 8 * time.Minute

// Runner runs one kind of analysis over the experiments' artifact
// locations (in the analysis' exp_ids order).
type Runner func(ctx context.Context, a *falconv1.Analysis, locs []blobstore.Location, blobs *blobstore.Opener) (*Result, error)

// Controller runs queued analyses.
type Controller struct {
	analyses falconv1.AnalysisServiceClient
	jobs     falconv1.JobServiceClient
	blobs    *blobstore.Opener
	runners  map[string]Runner
	log      *slog.Logger
	interval time.Duration
	worker   string

	loop watch.Loop
}

// Option configures a Controller.
type Option func(*Controller)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(c *Controller) { c.log = l } }

// WithInterval sets the safety-net poll (default 5s); new analyses wake
// the controller at once through the change feed.
func WithInterval(d time.Duration) Option { return func(c *Controller) { c.interval = d } }

// WithBlobs reads and writes artifacts through o (default: a new Opener
// with Application Default Credentials for gs://).
func WithBlobs(o *blobstore.Opener) Option { return func(c *Controller) { c.blobs = o } }

// WithRunner runs analyses of kind with r, replacing the built-in one; a
// nil r removes the kind (its analyses then fail, saying so).
func WithRunner(kind string, r Runner) Option {
	return func(c *Controller) {
		if r == nil {
			delete(c.runners, kind)
			return
		}
		c.runners[kind] = r
	}
}

// New returns a controller talking to the API server over conn.
func New(conn grpcConn, opts ...Option) *Controller {
	host, _ := os.Hostname()
	c := &Controller{
		analyses: falconv1.NewAnalysisServiceClient(conn),
		jobs:     falconv1.NewJobServiceClient(conn),
		log:      slog.Default(),
		interval: 5 * time.Second,
		runners:  map[string]Runner{"accuracy": runAccuracy, "profile": runProfile, "profile_compare": runProfileCompare},
		worker:   host + "_" + strconv.Itoa(os.Getpid()),
	}
	for _, o := range opts {
		o(c)
	}
	if c.blobs == nil {
		c.blobs = blobstore.NewOpener()
	}
	return c
}

// Run claims and runs analyses until ctx is done or Shutdown is called.
func (c *Controller) Run(ctx context.Context) error {
	// Woken by analyses' changes alone: nothing else makes one claimable
	// (a stale claim becomes so with time, which the interval covers), and
	// a claim at every job write cost the API server a query each, dozens
	// a second while experiments run. Another replica's new analysis,
	// which this server's feed does not carry, waits for the interval.
	wake := watch.Changes(ctx, c.jobs, c.log, "analysis")
	return c.loop.RunOn(ctx, wake, c.log, c.interval, "analysis", c.Reconcile)
}

// Shutdown lets the analysis in flight finish and stops Run, or gives up
// when ctx ends (cancel Run's context then: the cut analysis is claimed
// again once stale).
func (c *Controller) Shutdown(ctx context.Context) error { return c.loop.Shutdown(ctx) }

// Reconcile runs every analysis there is to claim now, one at a time.
func (c *Controller) Reconcile(ctx context.Context) error {
	for ctx.Err() == nil {
		if c.loop.Stopping() {
			return nil
		}
		resp, err := c.analyses.ClaimAnalysis(ctx, &falconv1.ClaimAnalysisRequest{Worker: c.worker})
		if err != nil {
			return err
		}
		a := resp.GetAnalysis()
		if a == nil {
			return nil
		}
		c.runOne(ctx, a, resp.GetArtifactPaths())
	}
	return ctx.Err()
}

// runOne runs a claimed analysis and reports how it ended. A failure to
// report is left to the next claim, once this one is stale.
func (c *Controller) runOne(ctx context.Context, a *falconv1.Analysis, paths []string) {
	log := c.log.With("analysis", a.GetId(), "kind", a.GetKind(), "exp", first(a.GetExpIds()))
	start := time.Now()
	finish := &falconv1.FinishAnalysisRequest{Id: a.GetId(), Status: "Failed", Worker: c.worker}
	// Bounded, so a hung read of a bucket cannot hold up the analyses
	// queued behind it, and it ends before its claim goes stale and
	// another controller takes it.
	rctx, cancel := context.WithTimeout(ctx, RunTimeout)
	defer cancel()
	res, reportPath, err := c.run(rctx, a, paths)
	if err != nil && rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		err = fmt.Errorf("stopped after %s (the limit of one analysis): %w", RunTimeout, err)
	}
	if err != nil {
		finish.Message = err.Error()
		log.Warn("analysis failed", "err", err)
	} else {
		finish.Status, finish.ReportPath = "Succeeded", reportPath
		if b, err := json.Marshal(res.Summary); err == nil {
			finish.Summary = string(b)
		}
		log.Info("analysis done", "report", reportPath, "took", time.Since(start).Round(time.Millisecond))
	}
	if _, err := c.analyses.FinishAnalysis(ctx, finish); err != nil {
		log.Warn("report analysis outcome", "err", err)
	}
}

func (c *Controller) run(ctx context.Context, a *falconv1.Analysis, paths []string) (*Result, string, error) {
	r, ok := c.runners[a.GetKind()]
	if !ok {
		return nil, "", fmt.Errorf("this controller cannot run %s analyses", a.GetKind())
	}
	locs := make([]blobstore.Location, len(paths))
	for i, p := range paths {
		l, err := blobstore.Parse("artifact_path", p)
		if err != nil {
			return nil, "", err
		}
		locs[i] = l
	}
	if len(locs) == 0 {
		return nil, "", fmt.Errorf("no artifacts to analyse")
	}
	res, err := r(ctx, a, locs, c.blobs)
	if err != nil {
		return nil, "", err
	}
	dir := "reports/" + a.GetId() + "/"
	report, err := json.MarshalIndent(res.Report, "", "  ")
	if err != nil {
		return nil, "", err
	}
	for _, f := range []struct {
		name, ctype string
		data        []byte
	}{{"report.json", "application/json", append(report, '\n')}, {"report.md", "text/markdown", []byte(res.Markdown)}} {
		if err := c.write(ctx, locs[0], dir+f.name, f.ctype, f.data); err != nil {
			return nil, "", err
		}
	}
	return res, locs[0].String() + dir + "report.json", nil
}

func (c *Controller) write(ctx context.Context, l blobstore.Location, rel, ctype string, data []byte) error {
	w, err := c.blobs.Writer(ctx, l, rel, ctype)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
		w.Close()
		return blobstore.Err(rel, err)
	}
	if err := w.Close(); err != nil {
		return blobstore.Err(rel, err)
	}
	return nil
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// blobSource is one experiment's artifacts as an accuracy.Source.
type blobSource struct {
	ctx   context.Context
	blobs *blobstore.Opener
	loc   blobstore.Location
}

func (s blobSource) Files() ([]string, error) {
	var out []string
	err := s.blobs.Walk(s.ctx, s.loc, func(f blobstore.File) error {
		out = append(out, f.Path)
		return nil
	})
	return out, err
}

func (s blobSource) Open(rel string) (io.ReadCloser, error) {
	r, _, err := s.blobs.Open(s.ctx, s.loc, rel, 0, -1)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// runAccuracy compares the two experiments' .npy dumps.
func runAccuracy(ctx context.Context, a *falconv1.Analysis, locs []blobstore.Location, blobs *blobstore.Opener) (*Result, error) {
	tol := accuracy.DefaultTolerances
	p := a.GetParams()
	if v, ok := p["rtol"]; ok {
		tol.RTol, _ = strconv.ParseFloat(v, 64)
	}
	if v, ok := p["atol"]; ok {
		tol.ATol, _ = strconv.ParseFloat(v, 64)
	}
	r, err := accuracy.Compare(blobSource{ctx, blobs, locs[0]}, blobSource{ctx, blobs, locs[1]}, p["path"], tol)
	if err != nil {
		return nil, err
	}
	if !r.PatternMatched {
		where := "*.npy"
		if p["path"] != "" {
			where = p["path"]
		}
		return nil, fmt.Errorf("no .npy files matching %s under %s or %s: jobs write them to $FALCON_ARTIFACT_DIR", where, locs[0], locs[1])
	}
	summary := map[string]any{"tensors": len(r.Tensors), "allclose": r.AllClose, "not_close": r.NotClose,
		"shape_mismatch": len(r.ShapeMismatch), "only_in_a": len(r.OnlyInA), "only_in_b": len(r.OnlyInB)}
	return &Result{Summary: summary, Report: r, Markdown: accuracy.Markdown(r, a.GetExpIds()[0], a.GetExpIds()[1])}, nil
}
