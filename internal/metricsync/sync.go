package metricsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/runmetrics"
	"github.com/falconhq/falcon/internal/store"
)

// Store is what metricsync needs of Falcon's store.
type Store interface {
	AppendMetrics(ctx context.Context, expID string, cur store.MetricCursor, points []store.MetricPoint) error
	MetricCursors(ctx context.Context, expID string) ([]store.MetricCursor, error)
	ListMetricPoints(ctx context.Context, expID string, names []string) ([]store.MetricPoint, error)
}

// Sources opens what a job reports, from a byte offset. A source that does
// not exist (yet) is errdefs.ErrNotFound.
type Sources interface {
	// MetricsFile opens the artifact's metrics.jsonl.
	MetricsFile(ctx context.Context, exp *store.Experiment, offset int64) (io.ReadCloser, error)
	// RankLog opens rank 0's log of the job of role.
	RankLog(ctx context.Context, exp *store.Experiment, role string, offset int64) (io.ReadCloser, error)
}

// cursorSource names the one cursor row an experiment has: both sources
// move through one runmetrics.Cursor.
const cursorSource = "extractor"

// doc is the stored cursor: the extractor's own, and the ordinal each
// (metric, source) gives its next point.
type doc struct {
	Cursor runmetrics.Cursor `json:"cursor"`
	Ords   map[string]int64  `json:"ords,omitempty"`
}

// Syncer extracts metrics into the store.
type Syncer struct {
	store   Store
	sources Sources
}

// New returns a Syncer.
func New(st Store, src Sources) *Syncer { return &Syncer{store: st, sources: src} }

// Refresh reads what is new in the experiment's sources into the store.
// ended says the job can write no more: the sources are read to the end
// and marked done.
func (s *Syncer) Refresh(ctx context.Context, exp *store.Experiment, ended bool) error {
	curs, err := s.store.MetricCursors(ctx, exp.ID)
	if err != nil {
		return err
	}
	var d doc
	for _, c := range curs {
		if c.Source != cursorSource {
			continue
		}
		if c.Done {
			return nil
		}
		if err := json.Unmarshal([]byte(c.Doc), &d); err != nil {
			return fmt.Errorf("metrics cursor of %s: %w", exp.ID, err)
		}
	}
	if d.Ords == nil {
		d.Ords = map[string]int64{}
	}
	specs := specsOf(exp)
	patterns, err := runmetrics.Compile(specs)
	if err != nil {
		// Validated at create; a pattern stored before validation existed
		// reads no log rather than failing every refresh.
		patterns = nil
	}
	ex := runmetrics.NewExtractor(patterns, d.Cursor)

	flush := func(points []runmetrics.Point) error {
		rows := make([]store.MetricPoint, len(points))
		for i, p := range points {
			key := p.Name + "\x00" + string(p.Source)
			rows[i] = store.MetricPoint{Name: p.Name, Source: string(p.Source), Ord: d.Ords[key], Step: p.Step, Value: p.Value}
			d.Ords[key]++
		}
		d.Cursor = ex.Cursor()
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		return s.store.AppendMetrics(ctx, exp.ID, store.MetricCursor{Source: cursorSource, Doc: string(b), Skipped: d.Cursor.Skipped()}, rows)
	}

	if r, err := s.sources.MetricsFile(ctx, exp, ex.Cursor().FileOffset); err == nil {
		err = ex.ReadFile(r, ended, flush)
		r.Close()
		if err != nil {
			return err
		}
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	if patterns != nil && len(exp.RoleToTaskSpec) > 0 {
		if r, err := s.sources.RankLog(ctx, exp, firstRole(exp), ex.Cursor().LogOffset); err == nil {
			err = ex.ReadLog(r, ended, flush)
			r.Close()
			if err != nil {
				return err
			}
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
	}
	if !ended {
		return nil
	}
	d.Cursor = ex.Cursor()
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return s.store.AppendMetrics(ctx, exp.ID, store.MetricCursor{Source: cursorSource, Doc: string(b), Skipped: d.Cursor.Skipped(), Done: true}, nil)
}

func firstRole(exp *store.Experiment) string {
	roles := make([]string, 0, len(exp.RoleToTaskSpec))
	for r := range exp.RoleToTaskSpec {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	return roles[0]
}

func specsOf(exp *store.Experiment) []runmetrics.Spec {
	specs := make([]runmetrics.Spec, len(exp.Metrics))
	for i, m := range exp.Metrics {
		specs[i] = runmetrics.Spec{Name: m.Name, Pattern: m.Pattern, Better: m.Better}
	}
	return specs
}

// Result is an experiment's metrics as `falcon exp metrics` shows them.
type Result struct {
	Report  runmetrics.Report
	Skipped int64
	// Series holds the points of the names asked for, after the rule that
	// a name reported by both sources keeps the file's.
	Series map[string][]runmetrics.Point
}

// Summary reads the stored points and summarises them.
func (s *Syncer) Summary(ctx context.Context, exp *store.Experiment, series []string) (*Result, error) {
	rows, err := s.store.ListMetricPoints(ctx, exp.ID, nil)
	if err != nil {
		return nil, err
	}
	points := make([]runmetrics.Point, len(rows))
	for i, r := range rows {
		points[i] = runmetrics.Point{Name: r.Name, Step: r.Step, Value: r.Value, Source: runmetrics.Source(r.Source)}
	}
	res := &Result{Report: runmetrics.Summarize(points, specsOf(exp)), Series: map[string][]runmetrics.Point{}}
	curs, err := s.store.MetricCursors(ctx, exp.ID)
	if err != nil {
		return nil, err
	}
	for _, c := range curs {
		res.Skipped += c.Skipped
	}
	if len(series) > 0 {
		known := map[string]bool{}
		for _, m := range res.Report.Metrics {
			known[m.Name] = true
		}
		kept, _ := runmetrics.Resolve(points)
		for _, name := range series {
			if !known[name] {
				return nil, errdefs.Invalid("series", "experiment %s has no metric %q; it has: %s", exp.ID, name, names(res.Report))
			}
			for _, p := range kept {
				if p.Name == name {
					res.Series[name] = append(res.Series[name], p)
				}
			}
		}
	}
	return res, nil
}

func names(r runmetrics.Report) string {
	if len(r.Metrics) == 0 {
		return "none"
	}
	out := ""
	for i, m := range r.Metrics {
		if i > 0 {
			out += ", "
		}
		out += m.Name
	}
	return out
}
