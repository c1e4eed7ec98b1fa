package get

import (
	"context"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon job get`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	ID string
}

// NewCmdGet builds the command. runF replaces getRun in tests.
func NewCmdGet(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	return &cobra.Command{
		Use: "get ID",
		Example: `  falcon job get job-ki5t2jegpi
  falcon job get job-ki5t2jegpi --jq .message`,
		Aliases: []string{"show", "describe"},
		Short:   "Show a job",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return getRun(cmd.Context(), opts)
		},
	}
}

func getRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	job, err := c.GetJob(ctx, &falconv1.GetJobRequest{Id: opts.ID})
	if err != nil {
		return err
	}
	return opts.Printer().Print(job, output.JobDetail(job))
}
