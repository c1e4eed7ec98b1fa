package metrics

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp metrics`.
type Options struct {
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	ID     string
	Series []string
}

// NewCmdMetrics builds the command. runF replaces metricsRun in tests.
func NewCmdMetrics(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "metrics ID",
		Short: "Summarise the metrics an experiment reported",
		Long: `Summarise every metric the experiment's job reported: JSON lines in
$FALCON_ARTIFACT_DIR/metrics.jsonl ({"step": 10, "step_time": 0.41}), and
lines of rank 0's log matched by the manifest's metrics: patterns. For each
metric: count, first, last, min, max, mean and median.

Lines that could not be read are skipped and counted (skipped_lines), never
failing the job. A metric reported both ways keeps the file's points and is
listed under conflicts. --series prints a metric's points by step.`,
		Example: `  falcon exp metrics exp-q7odgo8q9x
  falcon exp metrics exp-q7odgo8q9x -o json | jq '.metrics[] | select(.name == "step_time") | .median'
  falcon exp metrics exp-q7odgo8q9x --series loss -o json | jq -c '.series[0].points[]'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return metricsRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringSliceVar(&opts.Series, "series", nil, "Also print the points of these metrics")
	return cmd
}

func metricsRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := c.GetExpMetrics(ctx, &falconv1.GetExpMetricsRequest{Id: opts.ID, Series: opts.Series})
	if err != nil {
		return err
	}
	return opts.Printer().Print(resp, table(resp))
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func table(m *falconv1.ExpMetrics) output.TableFunc {
	return func(v output.View) error {
		if len(m.GetMetrics()) == 0 {
			fmt.Fprintln(v.Notes, "No metrics reported (yet).")
		} else {
			cols := []output.Column[*falconv1.MetricSummary]{
				{Header: "NAME", Value: func(s *falconv1.MetricSummary) string { return s.GetName() }},
				{Header: "COUNT", Value: func(s *falconv1.MetricSummary) string { return strconv.Itoa(int(s.GetCount())) }},
				{Header: "FIRST", Value: func(s *falconv1.MetricSummary) string { return num(s.GetFirst()) }},
				{Header: "LAST", Value: func(s *falconv1.MetricSummary) string { return num(s.GetLast()) }},
				{Header: "MIN", Value: func(s *falconv1.MetricSummary) string { return num(s.GetMin()) }},
				{Header: "MAX", Value: func(s *falconv1.MetricSummary) string { return num(s.GetMax()) }},
				{Header: "MEAN", Value: func(s *falconv1.MetricSummary) string { return num(s.GetMean()) }},
				{Header: "MEDIAN", Value: func(s *falconv1.MetricSummary) string { return num(s.GetMedian()) }},
				{Header: "BETTER", Value: func(s *falconv1.MetricSummary) string { return s.GetBetter() }},
				{Header: "SOURCE", Value: func(s *falconv1.MetricSummary) string { return s.GetSource() }},
			}
			if err := output.WriteTable(v.Out, cols, m.GetMetrics()); err != nil {
				return err
			}
		}
		for _, s := range m.GetSeries() {
			fmt.Fprintf(v.Out, "\n%s\nSTEP\tVALUE\n", s.GetName())
			for _, p := range s.GetPoints() {
				fmt.Fprintf(v.Out, "%d\t%s\n", p.GetStep(), num(p.GetValue()))
			}
		}
		if n := m.GetSkippedLines(); n > 0 {
			fmt.Fprintf(v.Notes, "%d lines could not be read as metrics and were skipped.\n", n)
		}
		if c := m.GetConflicts(); len(c) > 0 {
			fmt.Fprintf(v.Notes, "Reported both in metrics.jsonl and by a log pattern (the file's points are kept): %s\n", strings.Join(c, ", "))
		}
		return nil
	}
}
