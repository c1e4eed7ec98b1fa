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

// Options are the inputs of `falcon exp get`.
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
		Use:     "get ID",
		Aliases: []string{"show", "describe"},
		Short:   "Show an experiment with its jobs and artifact",
		Example: `  falcon exp get exp-q7odgo8q9x
  falcon exp get exp-q7odgo8q9x -o json | jq -r .status`,
		Args: cobra.ExactArgs(1),
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
	exp, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: opts.ID})
	if err != nil {
		return err
	}
	return opts.Printer().Print(exp, output.ExperimentDetail(exp))
}
