package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/yaml"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"

	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/since"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
	simcore "github.com/falconhq/falcon/internal/sim"
)

// Options are the inputs of `falcon sim`.
type Options struct {
	F        *factory.Factory
	Trace    string
	FromDB   bool
	Since    string
	Clusters string
	Policies []string
	Out      string
	Format   string
	Seed     uint64
}

// DefaultSince is how far back --from-db reads without --since.
const DefaultSince = "7d"

// NewCmdSim builds `falcon sim` and its gen subcommand. runF replaces
// simRun in tests.
func NewCmdSim(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "sim (--trace FILE | --from-db [--since 7d]) [--clusters FILE] [--policy P ...]",
		Short: "Replay a trace of jobs through the scheduler's rules and compare policies",
		Long: `Replays a trace of jobs (JSON lines) in virtual time through the resource
manager's own selection, queueing and node-pool rules against simulated GKE
clusters, once per policy, and reports side by side: pools created and
reused, pool-minutes busy and idle, waits per user (mean, p95, max), Jain's
index of the users' mean waits, the worst user's p95 over the median
user's, and each cluster's use.

Policies: spec (000: reuse an idle pool of the shape, else delete it at
once), per-job (a pool per job), linger=DUR (keep an idle pool up to DUR),
cap=N (at most N pools of a shape per cluster: a job beyond waits for one
to fall free), priority (001's cluster choice); join terms with +
(priority+cap=8, which meets every pool goal on the bundled day).

--from-db replays the real history instead of a file: the jobs created
since --since (a duration back from now, such as 7d or 36h, or an RFC 3339
time), read from the API server (admins only). Jobs that never started,
CPU and GPU jobs, and multi-slice jobs are left out and counted on
stderr. Without
--clusters the simulated clusters take the names of those the history ran
on, so that pinned jobs find theirs.`,
		Example: `  falcon sim --trace internal/sim/testdata/day.jsonl --policy spec --policy per-job --policy linger=15m --policy priority+cap=8
  falcon sim --trace day.jsonl --clusters sim-clusters.yaml -o md
  falcon sim --trace day.jsonl --out ./timeline     # one CSV per policy, a row per job
  falcon sim --trace day.jsonl --out ./timeline --out-format parquet
  falcon sim --from-db --since 7d --policy spec --policy linger=20m
  falcon sim gen --users 8 --jobs 1000 --shapes v5p:2x2x1,v5p:2x2x4 --burstiness 0.7 > trace.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.check(cmd.Flags().Changed("since")); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return simRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Trace, "trace", "", "Trace of jobs, JSON lines: {\"t\", \"user\", \"accelerator\", \"topology\", \"hosts\", \"duration\", \"supply_mode\", \"cluster\"}")
	fl.StringVar(&opts.Clusters, "clusters", "", "Simulated clusters (YAML; default: two clusters offering every accelerator of the trace)")
	fl.StringArrayVar(&opts.Policies, "policy", []string{"spec", "per-job", "linger=15m", "priority"}, "Policy to simulate, repeatable: "+simcore.PolicyNames)
	fl.BoolVar(&opts.FromDB, "from-db", false, "Replay the jobs table's history through the API server instead of --trace (admins only)")
	fl.StringVar(&opts.Since, "since", DefaultSince, "With --from-db: the jobs created since then, a duration back from now (7d, 36h) or an RFC 3339 time")
	fl.StringVar(&opts.Out, "out", "", "Directory to write each policy's per-job timeline into, one file per policy")
	fl.StringVar(&opts.Format, "out-format", simcore.FormatCSV, "Format of the --out files: "+simcore.TimelineFormats)
	fl.Uint64Var(&opts.Seed, "seed", 1, "Seed of the clusters' random draws (pool creation times, stockouts)")
	cmd.AddCommand(newCmdGen(f, nil))
	return cmd
}

// check refuses flags that do not go together, naming them.
func (opts *Options) check(sinceSet bool) error {
	switch {
	case opts.Trace != "" && opts.FromDB:
		return errdefs.Invalid("--trace", "conflicts with --from-db: replay either a trace file or the jobs table's history, not both")
	case opts.Trace == "" && !opts.FromDB:
		return errdefs.Invalid("--trace", "is required: a file of JSON lines (falcon sim gen writes one), or --from-db for the jobs table's history")
	case sinceSet && !opts.FromDB:
		return errdefs.Invalid("--since", "only applies with --from-db")
	case opts.Format != simcore.FormatCSV && opts.Format != simcore.FormatParquet:
		return errdefs.Invalid("--out-format", "%q: allowed: %s", opts.Format, simcore.TimelineFormats)
	}
	if opts.FromDB {
		if _, err := since.Parse(opts.Since, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// fromDB reads the history since --since through the API server and
// turns it into a trace, saying on stderr what it left out.
func fromDB(ctx context.Context, opts *Options) ([]simcore.Job, []string, error) {
	now := time.Now()
	since, err := since.Parse(opts.Since, now)
	if err != nil {
		return nil, nil, err
	}
	c, err := opts.F.Client()
	if err != nil {
		return nil, nil, err
	}
	var jobs []*falconv1.Job
	token := ""
	for {
		resp, err := c.ListJobHistory(ctx, &falconv1.ListJobHistoryRequest{Since: timestamppb.New(since), PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, nil, err
		}
		jobs = append(jobs, resp.GetItems()...)
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	trace, names, skipped := simcore.FromHistory(jobs, now)
	if n := skipped.Total(); n > 0 {
		fmt.Fprintf(opts.F.IOStreams.ErrOut, "%d of %d jobs since %s left out: %s\n", n, len(jobs), since.UTC().Format(time.RFC3339), skipped)
	}
	if len(trace) == 0 {
		return nil, nil, fmt.Errorf("--from-db --since %s: no job since %s can be replayed (%d found)", opts.Since, since.UTC().Format(time.RFC3339), len(jobs))
	}
	return trace, names, nil
}

func simRun(ctx context.Context, opts *Options) error {
	var policies []simcore.Policy
	for _, s := range opts.Policies {
		p, err := simcore.ParsePolicy(s)
		if err != nil {
			return err
		}
		policies = append(policies, p)
	}
	var trace []simcore.Job
	var names []string
	source := opts.Trace
	if opts.FromDB {
		var err error
		if trace, names, err = fromDB(ctx, opts); err != nil {
			return err
		}
		source = "jobs table since " + opts.Since
	} else {
		tf, err := os.Open(opts.Trace)
		if err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
		trace, err = simcore.ParseTrace(tf)
		tf.Close()
		if err != nil {
			return fmt.Errorf("--trace %s: %w", opts.Trace, err)
		}
	}
	cfg := simcore.DefaultConfigNamed(trace, names)
	if opts.Clusters != "" {
		data, err := os.ReadFile(opts.Clusters)
		if err != nil {
			return fmt.Errorf("--clusters: %w", err)
		}
		if cfg, err = simcore.ParseClusters(data); err != nil {
			return fmt.Errorf("--clusters %s: %w", opts.Clusters, err)
		}
	}
	var results []*simcore.Result
	for _, p := range policies {
		r, err := simcore.Simulate(trace, cfg, p, opts.Seed)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	if opts.Out != "" {
		if err := simcore.WriteTimelines(opts.Out, opts.Format, results); err != nil {
			return err
		}
	}
	pr := opts.F.Printer()
	switch pr.Format {
	case output.JSON, output.YAML:
		doc, err := json.Marshal(struct {
			Trace    string            `json:"trace"`
			Policies []*simcore.Result `json:"policies"`
		}{source, results})
		if err != nil {
			return err
		}
		if pr.Format == output.JSON && pr.JQ == nil {
			var b bytes.Buffer
			_ = json.Indent(&b, doc, "", "  ")
			b.WriteByte('\n')
			_, err = pr.Out.Write(b.Bytes())
			return err
		}
		if pr.Format == output.JSON {
			return pr.WriteJSON(pr.Out, doc)
		}
		y, err := yaml.JSONToYAML(doc)
		if err != nil {
			return err
		}
		_, err = pr.Out.Write(y)
		return err
	}
	days := trace[len(trace)-1].T.Sub(trace[0].T).Round(time.Minute)
	fmt.Fprintf(pr.Out, "%d jobs over %s, %d clusters\n\n", len(trace), days, len(cfg.Clusters))
	return simcore.WriteTable(pr.Out, results, pr.Format == output.Markdown)
}
