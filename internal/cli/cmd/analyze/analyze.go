package analyze

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of every `falcon analyze` command.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	Kind   string
	IDs    []string
	Params map[string]string
	NoWait bool
	// Poll is how often the CLI asks whether the analysis has ended.
	Poll time.Duration
}

// NewCmdAnalyze returns `falcon analyze` with its kinds.
func NewCmdAnalyze(f *factory.Factory) *cobra.Command {
	cmd := factory.Group(&cobra.Command{
		Use: "analyze <command>",
		Example: `  falcon analyze profile exp-q7odgo8q9x
  falcon analyze compare exp-baseline0 exp-candidate -o json | jq .summary
  falcon analyze accuracy exp-q7odgo8q9x exp-2222222222 --rtol 1e-3`,
		Short: "Analyse experiments' artifacts next to the data (accuracy, profiles)",
		Long: `Queue an analysis of experiments' artifacts. The analysis controller (in
falcon controller and falcon dev) reads them from their storage, so a large
dump or profile never travels to this machine; it keeps the headline
figures with the analysis and the full result as report.json and report.md
under the first experiment's artifacts (falcon report ls / cat). Each
command waits for the analysis and prints its report; --no-wait prints the
analysis ID at once.`,
	})
	cmd.AddCommand(newAccuracy(f, nil), newProfile(f, nil), newCompare(f, nil))
	return cmd
}

func newOptions(f *factory.Factory) *Options {
	return &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer, Params: map[string]string{}, Poll: 500 * time.Millisecond}
}

func newAccuracy(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := newOptions(f)
	var path string
	var rtol, atol float64
	cmd := &cobra.Command{
		Use:   "accuracy A B [--path GLOB] [--rtol R] [--atol A]",
		Short: "Compare two experiments' numeric dumps (.npy) tensor by tensor",
		Long: `Compare the .npy arrays two experiments wrote (float32, float16, float64,
and bfloat16, which np.save stores as <V2), matched by relative path under
their artifacts (--path narrows, e.g. 'dumps/*.npy'): for each pair its
shape, the largest absolute and relative errors, the mean absolute error,
the cosine similarity, whether numpy.allclose(a, b, rtol, atol) holds and
the first index where it does not. Shapes that differ, files on one side
only and files that cannot be read are listed, not fatal.`,
		Example: `  falcon analyze accuracy exp-jax0123456 exp-torch01234 --path 'dumps/*' --rtol 1e-3 --atol 1e-5`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Kind, opts.IDs = "accuracy", args
			if path != "" {
				opts.Params["path"] = path
			}
			for name, v := range map[string]float64{"rtol": rtol, "atol": atol} {
				if !cmd.Flags().Changed(name) {
					continue
				}
				if v < 0 {
					return errdefs.Invalid("--"+name, "must be 0 or more, got %g", v)
				}
				opts.Params[name] = strconv.FormatFloat(v, 'g', -1, 64)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&path, "path", "", "Only the files whose relative path matches this glob")
	cmd.Flags().Float64Var(&rtol, "rtol", 1e-5, "Relative tolerance, as numpy.allclose")
	cmd.Flags().Float64Var(&atol, "atol", 1e-8, "Absolute tolerance, as numpy.allclose")
	cmd.Flags().BoolVar(&opts.NoWait, "no-wait", false, "Print the analysis ID and return at once")
	return cmd
}

func profileFlags(cmd *cobra.Command, opts *Options, rank *int, session *string) {
	cmd.Flags().IntVar(rank, "rank", 0, "The rank whose profile to read")
	cmd.Flags().StringVar(session, "session", "", "The profile session (plugins/profile/<session>/); default: the newest")
	cmd.Flags().BoolVar(&opts.NoWait, "no-wait", false, "Print the analysis ID and return at once")
}

func setProfileParams(cmd *cobra.Command, opts *Options, rank int, session string) error {
	if cmd.Flags().Changed("rank") {
		if rank < 0 {
			return errdefs.Invalid("--rank", "must be 0 or more, got %d", rank)
		}
		opts.Params["rank"] = strconv.Itoa(rank)
	}
	if session != "" {
		opts.Params["session"] = session
	}
	return nil
}

func newProfile(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := newOptions(f)
	var rank int
	var session string
	cmd := &cobra.Command{
		Use:   "profile EXP [--rank N] [--session S]",
		Short: "Analyse an experiment's XProf profile: step time, top ops, FLOPS and HBM utilization",
		Long: `Analyse the XProf profile a job wrote under its artifacts,
plugins/profile/<session>/<host>.xplane.pb (jax.profiler.start_trace with
$FALCON_ARTIFACT_DIR as the log dir): step time statistics from each
device's Steps line; per-op total and self time from its XLA Ops line,
grouped by HLO category, and the top ops; FLOPS utilization (the ops' flops
over step time times the device's peak, from the profile or the
accelerator the experiment ran on); HBM bandwidth utilization from bytes
accessed; and the device's idle time. The profile is read where it is
stored, in ranged reads, with bounded memory.`,
		Example: `  falcon analyze profile exp-q7odgo8q9x
  falcon analyze profile exp-q7odgo8q9x --rank 3 --session 2026_12_01_17_02_11 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Kind, opts.IDs = "profile", args
			if err := setProfileParams(cmd, opts, rank, session); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	profileFlags(cmd, opts, &rank, &session)
	return cmd
}

func newCompare(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := newOptions(f)
	var rank int
	var session string
	cmd := &cobra.Command{
		Use:   "compare A B [--rank N] [--session S]",
		Short: "A/B two experiments' profiles: step time and utilization deltas, the ops that changed most",
		Long: `Analyse the profiles of two experiments (as falcon analyze profile does)
and compare them: step time and FLOPS and HBM utilization deltas, category
and op self time per step, the ops whose self time changed most (absolute
and relative), and the ops found in one run only.`,
		Example: `  falcon analyze compare exp-base01234 exp-cand56789 -o md`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Kind, opts.IDs = "profile_compare", args
			if err := setProfileParams(cmd, opts, rank, session); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	profileFlags(cmd, opts, &rank, &session)
	return cmd
}

// Run queues the analysis and, unless NoWait, waits for it and prints its
// report (Markdown for people, the analysis with its summary as JSON or
// YAML).
func Run(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	a, err := c.CreateAnalysis(ctx, &falconv1.CreateAnalysisRequest{Kind: opts.Kind, ExpIds: opts.IDs, Params: opts.Params})
	if err != nil {
		return err
	}
	p := opts.Printer()
	if opts.NoWait {
		return p.Print(a, output.Text("%s", a.GetId()))
	}
	fmt.Fprintf(opts.IO.ErrOut, "Analysis %s queued; waiting for the analysis controller...\n", a.GetId())
	t := time.NewTicker(opts.Poll)
	defer t.Stop()
	for a.GetStatus() != "Succeeded" && a.GetStatus() != "Failed" {
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped waiting for analysis %s (it goes on; falcon report ls %s): %w", a.GetId(), opts.IDs[0], ctx.Err())
		case <-t.C:
		}
		if a, err = c.GetAnalysis(ctx, &falconv1.GetAnalysisRequest{Id: a.GetId()}); err != nil {
			return err
		}
	}
	if a.GetStatus() == "Failed" {
		return &factory.ExitError{Code: errdefs.ExitNotSucceeded, Kind: "AnalysisFailed", Err: fmt.Errorf("analysis %s failed: %s", a.GetId(), a.GetMessage())}
	}
	return p.Print(a, func(v output.View) error {
		return CatReport(ctx, c, v.Out, opts.IDs[0], a.GetId(), "md")
	})
}

// CatReport copies an analysis' report (format "md" or "json") to w.
func CatReport(ctx context.Context, c *client.Client, w io.Writer, expID, analysisID, format string) error {
	name := map[string]string{"md": "report.md", "json": "report.json"}[format]
	if name == "" {
		return errdefs.Invalid("--format", "%q is not a report format; allowed: md, json", format)
	}
	r, err := c.OpenArtifactFile(ctx, expID, "reports/"+analysisID+"/"+name, 0)
	if err != nil {
		if strings.Contains(err.Error(), "no such file") {
			return errdefs.NotFoundf("analysis %s has no %s under %s's artifacts (falcon report ls %s)", analysisID, name, expID, expID)
		}
		return err
	}
	defer r.Close()
	_, err = io.Copy(w, r)
	return err
}
