package list

import (
	"context"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon job list`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	ExpID     string
	Statuses  []string
	Cluster   string
	Limit     int32
	PageToken string
}

// NewCmdList builds the command. runF replaces listRun in tests.
func NewCmdList(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List jobs",
		Long: `List jobs, one page at a time.

--status may be repeated or comma-separated and is matched
case-insensitively; a job matches any of the statuses given.`,
		Example: `  falcon job list --exp exp-q7odgo8q9x
  falcon job list --status pending,running --cluster v7x-east -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := factory.CheckLimit(opts.Limit); err != nil {
				return err
			}
			statuses, err := factory.ParseStatuses("--status", lifecycle.JobMachine, opts.Statuses)
			if err != nil {
				return err
			}
			opts.Statuses = statuses
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.ExpID, "exp", "", "Only jobs of this experiment")
	fl.StringSliceVar(&opts.Statuses, "status", nil, "Only jobs with one of these statuses (Pending, Running, Succeeded, Failed, Aborting, Aborted)")
	fl.StringVar(&opts.Cluster, "cluster", "", "Only jobs on this cluster")
	factory.AddPageFlags(fl, &opts.Limit, &opts.PageToken, "jobs")
	factory.SetsField(fl, "cluster", "cluster_name")
	factory.SetsField(fl, "exp", "exp_id")
	factory.SetsField(fl, "status", "statuses")
	return cmd
}

func listRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := c.ListJobs(ctx, &falconv1.ListJobsRequest{
		ExpId:       opts.ExpID,
		Statuses:    opts.Statuses,
		ClusterName: opts.Cluster,
		PageSize:    opts.Limit,
		PageToken:   opts.PageToken,
	})
	if err != nil {
		return err
	}
	return opts.Printer().Print(resp, output.JobList(resp))
}
