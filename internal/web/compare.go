package web

import (
	"net/http"
	"slices"

	"golang.org/x/sync/errgroup"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/compare"
)

// maxCompared is the most experiments one comparison page shows: one chart
// with more lines than this is read by nobody. (The CLI allows
// compare.MaxExperiments in a table.)
const maxCompared = 5

type compareView struct {
	Exps []*falconv1.Experiment
	IDs  []string
	All  bool // every row of the diff, not only those that differ
	Diff *compare.SpecDiff
	// Verdicts is compare.Metrics over the metrics all report; VerdictErr
	// why there is none.
	Verdicts   *compare.Result
	VerdictErr string
	Charts     []chart
	MetricsErr string
}

func (h *Handler) comparePage(w http.ResponseWriter, r *http.Request) {
	ids := r.URL.Query()["id"]
	ids = slices.DeleteFunc(ids, func(s string) bool { return s == "" })
	if err := compare.CheckIDs(ids); err != nil {
		h.fail(w, r, badRequest("id", "%v (tick two to five experiments in the list)", err))
		return
	}
	if len(ids) > maxCompared {
		h.fail(w, r, badRequest("id", "at most %d experiments fit one comparison page, got %d", maxCompared, len(ids)))
		return
	}
	ctx := h.call(r)
	v := compareView{IDs: ids, All: query(r, "all") == "1", Exps: make([]*falconv1.Experiment, len(ids))}
	series := make([]*falconv1.ExpMetrics, len(ids))
	var g errgroup.Group
	for i, id := range ids {
		g.Go(func() error {
			e, err := h.exps.GetExp(ctx, &falconv1.GetExpRequest{Id: id})
			v.Exps[i] = e
			return err
		})
	}
	if err := g.Wait(); err != nil {
		h.fail(w, r, err)
		return
	}
	v.Diff = compare.Specs(v.Exps, v.All)

	// Which metrics each reports, then the points of all of them.
	var mg errgroup.Group
	for i, id := range ids {
		mg.Go(func() error {
			m, err := h.exps.GetExpMetrics(ctx, &falconv1.GetExpMetricsRequest{Id: id})
			if err != nil {
				return err
			}
			var names []string
			for _, s := range m.GetMetrics() {
				names = append(names, s.GetName())
			}
			if len(names) > 0 {
				m, err = h.exps.GetExpMetrics(ctx, &falconv1.GetExpMetricsRequest{Id: id, Series: names})
			}
			series[i] = m
			return err
		})
	}
	if err := mg.Wait(); err != nil {
		v.MetricsErr = message(err)
	} else {
		v.Charts, v.Verdicts, v.VerdictErr = compareMetrics(ids, series)
	}
	h.render(w, r, http.StatusOK, "compare.html", page{Title: "Compare", Nav: "experiments", Data: v})
}

// compareMetrics charts every metric any experiment reports, one line per
// experiment that has it, and runs compare.Metrics (the verdicts `falcon
// exp compare` prints) on those all of them report.
func compareMetrics(ids []string, ms []*falconv1.ExpMetrics) ([]chart, *compare.Result, string) {
	var names []string
	better := map[string]string{}
	for _, m := range ms {
		for _, s := range m.GetMetrics() {
			if !slices.Contains(names, s.GetName()) {
				names = append(names, s.GetName())
			}
			if s.GetBetter() != "" {
				better[s.GetName()] = s.GetBetter()
			}
		}
	}
	slices.Sort(names)
	if len(names) > maxCharts {
		names = names[:maxCharts]
	}
	in := make([]map[string]compare.Series, len(ids))
	var charts []chart
	for _, name := range names {
		var lines []chartLine
		for i, m := range ms {
			for _, s := range m.GetSeries() {
				if s.GetName() != name {
					continue
				}
				lines = append(lines, chartLine{Label: ids[i], Colour: i, Points: s.GetPoints()})
				if in[i] == nil {
					in[i] = map[string]compare.Series{}
				}
				vals := make([]float64, len(s.GetPoints()))
				for k, p := range s.GetPoints() {
					vals[k] = p.GetValue()
				}
				in[i][name] = compare.Series{Name: name, Better: better[name], Values: vals}
			}
		}
		charts = append(charts, newChart(name, lines))
	}
	for i := range in {
		if in[i] == nil {
			in[i] = map[string]compare.Series{}
		}
	}
	res, err := compare.Metrics(ids, in, nil, compare.DefaultOptions)
	if err != nil {
		return charts, nil, err.Error()
	}
	return charts, res, ""
}
