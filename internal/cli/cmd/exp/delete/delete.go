package delete

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp delete`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	ID  string
	Yes bool
}

// NewCmdDelete builds the command. runF replaces deleteRun in tests.
func NewCmdDelete(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use: "delete ID",
		Example: `  falcon exp delete exp-q7odgo8q9x --yes
  falcon exp delete my-old-run`,
		Aliases: []string{"rm"},
		Short:   "Delete an experiment",
		Long: `Delete an experiment.

Asks for confirmation on a terminal; without a terminal --yes is required.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return deleteRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Do not ask for confirmation")
	return cmd
}

func deleteRun(ctx context.Context, opts *Options) error {
	ok, err := factory.ConfirmOrRequireYes(opts.IO, opts.Yes, fmt.Sprintf("Delete %s?", opts.ID))
	if err != nil {
		return err
	}
	if !ok {
		return factory.Declined("nothing was deleted")
	}
	c, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := c.DeleteExp(ctx, &falconv1.DeleteExpRequest{Id: opts.ID})
	if err != nil {
		return err
	}
	id := resp.GetId()
	if id == "" {
		id = opts.ID
	}
	return opts.Printer().Print(resp, output.Text("Deleted %s", id))
}
