package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/output"
	simcore "github.com/falconhq/falcon/internal/sim"
)

// Options are the inputs of `falcon sim`.
type Options struct {
	F        *factory.Factory
	Trace    string
	Clusters string
	Policies []string
	Out      string
	Seed     uint64
}

// NewCmdSim builds `falcon sim` and its gen subcommand. runF replaces
// simRun in tests.
func NewCmdSim(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "sim --trace FILE [--clusters FILE] [--policy P ...]",
		Short: "Replay a trace of jobs through the scheduler's rules and compare policies",
		Long: `Replays a trace of jobs (JSON lines) in virtual time through the resource
manager's own selection, queueing and node-pool rules against simulated GKE
clusters, once per policy, and reports side by side: pools created and
reused, pool-minutes busy and idle, waits per user (mean, p95, max), Jain's
index of the users' mean waits, the worst user's p95 over the median
user's, and each cluster's use.

Policies: spec (000: reuse an idle pool of the shape, else delete it at
once), per-job (a pool per job), linger=DUR (keep an idle pool up to DUR),
priority (001's cluster choice); join terms with + (priority+linger=15m).`,
		Example: `  falcon sim --trace internal/sim/testdata/day.jsonl --policy spec --policy per-job --policy linger=15m
  falcon sim --trace day.jsonl --clusters sim-clusters.yaml -o md
  falcon sim --trace day.jsonl --out ./timeline     # one CSV per policy, a row per job
  falcon sim gen --users 8 --jobs 1000 --shapes v5p:2x2x1,v5p:2x2x4 --burstiness 0.7 > trace.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Trace == "" {
				return fmt.Errorf("--trace is required: a file of JSON lines (falcon sim gen writes one)")
			}
			if runF != nil {
				return runF(opts)
			}
			return simRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Trace, "trace", "", "Trace of jobs, JSON lines: {\"t\", \"user\", \"accelerator\", \"topology\", \"hosts\", \"duration\", \"supply_mode\", \"cluster\"}")
	fl.StringVar(&opts.Clusters, "clusters", "", "Simulated clusters (YAML; default: two clusters offering every accelerator of the trace)")
	fl.StringArrayVar(&opts.Policies, "policy", []string{"spec", "per-job", "linger=15m", "priority"}, "Policy to simulate, repeatable: "+simcore.PolicyNames)
	fl.StringVar(&opts.Out, "out", "", "Directory to write each policy's per-job timeline into, as CSV")
	fl.Uint64Var(&opts.Seed, "seed", 1, "Seed of the clusters' random draws (pool creation times, stockouts)")
	cmd.AddCommand(newCmdGen(f, nil))
	return cmd
}

func simRun(opts *Options) error {
	var policies []simcore.Policy
	for _, s := range opts.Policies {
		p, err := simcore.ParsePolicy(s)
		if err != nil {
			return err
		}
		policies = append(policies, p)
	}
	tf, err := os.Open(opts.Trace)
	if err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	trace, err := simcore.ParseTrace(tf)
	tf.Close()
	if err != nil {
		return fmt.Errorf("--trace %s: %w", opts.Trace, err)
	}
	cfg := simcore.DefaultConfig(trace)
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
		if err := simcore.WriteTimelines(opts.Out, results); err != nil {
			return err
		}
	}
	pr := opts.F.Printer()
	switch pr.Format {
	case output.JSON, output.YAML:
		doc, err := json.Marshal(struct {
			Trace    string            `json:"trace"`
			Policies []*simcore.Result `json:"policies"`
		}{opts.Trace, results})
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
