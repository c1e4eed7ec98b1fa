package sim

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/factory"
	simcore "github.com/falconhq/falcon/internal/sim"
)

// GenOptions are the inputs of `falcon sim gen`.
type GenOptions struct {
	F          *factory.Factory
	Users      int
	Jobs       int
	Shapes     string
	Burstiness float64
	Span       time.Duration
	Start      string
	Seed       uint64
}

func newCmdGen(f *factory.Factory, runF func(*GenOptions) error) *cobra.Command {
	opts := &GenOptions{F: f}
	cmd := &cobra.Command{
		Use:   "gen [--users N] [--jobs N] [--shapes A:T,...] [--burstiness B]",
		Short: "Write a synthetic trace for falcon sim (JSON lines on stdout)",
		Long: `Writes a deterministic synthetic trace: the same flags and seed give the
same jobs. Users submit in sessions of jobs of one shape a few minutes
apart (--burstiness 1) or one job at a time (0); each has a usual shape;
jobs run 5-90 minutes, short ones more often.`,
		Example: `  falcon sim gen --users 8 --jobs 1000 --shapes v5p:2x2x1,v5p:2x2x2,v5p:2x2x4 --burstiness 0.7 > trace.jsonl`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return genRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.Users, "users", 8, "Number of users")
	fl.IntVar(&opts.Jobs, "jobs", 1000, "Number of jobs")
	fl.StringVar(&opts.Shapes, "shapes", "v5p:2x2x1,v5p:2x2x2,v5p:2x2x4", "Slice shapes, ACCELERATOR:TOPOLOGY, comma-separated")
	fl.Float64Var(&opts.Burstiness, "burstiness", 0.7, "Share of sessions of several jobs, 0 to 1")
	fl.DurationVar(&opts.Span, "span", 24*time.Hour, "Arrivals fall within this span")
	fl.StringVar(&opts.Start, "start", "2026-01-05T00:00:00Z", "Time of the span's start (RFC 3339)")
	fl.Uint64Var(&opts.Seed, "seed", 1, "Seed: the same seed gives the same trace")
	return cmd
}

func genRun(opts *GenOptions) error {
	shapes, err := simcore.ParseShapes(opts.Shapes)
	if err != nil {
		return err
	}
	start, err := time.Parse(time.RFC3339, opts.Start)
	if err != nil {
		return &flagError{"--start", opts.Start, "an RFC 3339 time, e.g. 2026-01-05T00:00:00Z"}
	}
	jobs, err := simcore.Generate(simcore.GenOptions{Users: opts.Users, Jobs: opts.Jobs, Shapes: shapes, Burstiness: opts.Burstiness,
		Start: start, Span: opts.Span, Seed: opts.Seed})
	if err != nil {
		return err
	}
	return simcore.WriteTrace(opts.F.IOStreams.Out, jobs)
}

type flagError struct{ flag, value, want string }

func (e *flagError) Error() string { return e.flag + " " + e.value + ": want " + e.want }
