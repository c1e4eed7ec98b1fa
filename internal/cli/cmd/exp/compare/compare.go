package compare

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/compare"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp compare`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	IDs              []string
	Metrics          []string
	SkipSteps        int
	Threshold        float64
	FailOnRegression bool
}

// NewCmdCompare builds the command. runF replaces compareRun in tests.
func NewCmdCompare(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	var threshold string
	cmd := &cobra.Command{
		Use:   "compare BASELINE B [C...]",
		Short: "Compare experiments' metrics and call regressions",
		Long: fmt.Sprintf(`Compare the metrics the experiments report (falcon exp metrics) against
the first one, the baseline. For each metric all of them have (or each
--metric): its steady-state value in each experiment, the median of the
steps after warm-up (--skip-steps, by default the first 10%%, at most 100),
the change and the relative change, and a verdict:

  regression / improvement  the change is at least --threshold (2%%) and a
                            Mann-Whitney rank test on the per-step values
                            says it is not noise (p < 0.01), judged by the
                            metric's direction;
  within noise              smaller, or the steps overlap too much;
  changed (direction unknown)  the metric has no better: in the manifest
                            and its name says nothing (step_time, latency,
                            loss and memory are better lower; throughput,
                            tokens_per_sec, TFLOPS and MFU higher);
  too few steps             fewer than %d steps after warm-up on a side.

--fail-on-regression exits %d when any metric regressed, for CI. At most
%d experiments.`, compare.MinSamples, errdefs.ExitRegression, compare.MaxExperiments),
		Example: `  falcon exp compare exp-base01234 exp-cand56789 --fail-on-regression
  falcon exp compare exp-base01234 exp-cand56789 --metric step_time --skip-steps 50 --threshold 1% -o md`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := compare.CheckIDs(args); err != nil {
				return errdefs.Invalid("arguments", "%v", err)
			}
			opts.IDs = args
			t, err := parseThreshold(threshold)
			if err != nil {
				return errdefs.Invalid("--threshold", "%v", err)
			}
			opts.Threshold = t
			if !cmd.Flags().Changed("skip-steps") {
				opts.SkipSteps = -1
			} else if opts.SkipSteps < 0 {
				return errdefs.Invalid("--skip-steps", "must be 0 or more, got %d", opts.SkipSteps)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return compareRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&opts.Metrics, "metric", nil, "Compare only this metric (repeatable)")
	fl.IntVar(&opts.SkipSteps, "skip-steps", 0, "Warm-up steps to leave out of each series (default: the first 10%, at most 100)")
	fl.StringVar(&threshold, "threshold", "2%", "Least relative change that counts, e.g. 2% or 0.02")
	fl.BoolVar(&opts.FailOnRegression, "fail-on-regression", false, fmt.Sprintf("Exit %d if any metric regressed", errdefs.ExitRegression))
	return cmd
}

// parseThreshold reads 2% or 0.02.
func parseThreshold(s string) (float64, error) {
	v, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%q is not a relative change such as 2%% or 0.02", s)
	}
	if pct {
		f /= 100
	}
	return f, nil
}

func compareRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	series := make([]map[string]compare.Series, len(opts.IDs))
	for i, id := range opts.IDs {
		sum, err := c.GetExpMetrics(ctx, &falconv1.GetExpMetricsRequest{Id: id})
		if err != nil {
			return err
		}
		var names []string
		better := map[string]string{}
		for _, m := range sum.GetMetrics() {
			names = append(names, m.GetName())
			better[m.GetName()] = m.GetBetter()
		}
		series[i] = map[string]compare.Series{}
		if len(names) == 0 {
			continue
		}
		full, err := c.GetExpMetrics(ctx, &falconv1.GetExpMetricsRequest{Id: id, Series: names})
		if err != nil {
			return err
		}
		for _, s := range full.GetSeries() {
			vals := make([]float64, len(s.GetPoints()))
			for j, p := range s.GetPoints() {
				vals[j] = p.GetValue()
			}
			series[i][s.GetName()] = compare.Series{Name: s.GetName(), Better: better[s.GetName()], Values: vals}
		}
	}
	res, err := compare.Metrics(opts.IDs, series, opts.Metrics, compare.Options{SkipSteps: opts.SkipSteps, Threshold: opts.Threshold, Alpha: compare.DefaultOptions.Alpha})
	if err != nil {
		return errdefs.Precondition("%v", err)
	}
	msg, err := output.Struct(res)
	if err != nil {
		return err
	}
	if err := opts.Printer().Print(msg, func(v output.View) error { return render(v, res) }); err != nil {
		return err
	}
	if opts.FailOnRegression && res.Regressed {
		var which []string
		for _, m := range res.Metrics {
			for _, val := range m.Values[1:] {
				if val.Verdict == compare.Regression {
					which = append(which, fmt.Sprintf("%s in %s (%+.1f%%)", m.Name, val.Experiment, val.Relative*100))
				}
			}
		}
		return &factory.ExitError{Code: errdefs.ExitRegression, Kind: "Regression",
			Err: fmt.Errorf("regressed against %s: %s", opts.IDs[0], strings.Join(which, ", "))}
	}
	return nil
}

func render(v output.View, res *compare.Result) error {
	headers := []string{"METRIC", "BETTER", "EXPERIMENT", "STEPS", "MEDIAN", "DELTA", "CHANGE", "VERDICT"}
	var rows [][]string
	for _, m := range res.Metrics {
		for i, val := range m.Values {
			delta, change, verdict := "", "", "baseline"
			if i > 0 {
				delta = strconv.FormatFloat(val.Delta, 'g', 4, 64)
				change = fmt.Sprintf("%+.1f%%", val.Relative*100)
				verdict = val.Verdict
				if val.Why != "" && val.Verdict != compare.Regression && val.Verdict != compare.Improvement {
					verdict += " (" + val.Why + ")"
				}
			}
			better := m.Better
			if better == "" {
				better = "?"
			}
			rows = append(rows, []string{m.Name, better, val.Experiment, strconv.Itoa(val.Steps),
				strconv.FormatFloat(val.Median, 'g', 6, 64), delta, change, verdict})
		}
	}
	return output.WriteRows(v, headers, rows)
}
