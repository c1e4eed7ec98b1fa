package validate

import (
	"context"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/manifest"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp validate`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	Filename string
}

// NewCmdValidate builds the command. runF replaces validateRun in tests.
func NewCmdValidate(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check a manifest without creating the experiment",
		Long: `Check a manifest without creating anything.

The manifest is parsed strictly here, then sent to the server with
validate_only so the server's rules (names, topology, quotas...) apply too.
Prints "manifest is valid", or with -o json the experiment that would be
created. Exits 2 listing every problem otherwise.`,
		Example: `  falcon exp validate -f manifest.yaml && falcon exp create -f manifest.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return validateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Filename, "filename", "f", "", "Experiment manifest (YAML or JSON); - reads stdin")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func validateRun(ctx context.Context, opts *Options) error {
	data, err := factory.ReadFlagFile(opts.IO, "--filename", opts.Filename)
	if err != nil {
		return err
	}
	exp, err := manifest.Parse(data)
	if err != nil {
		return factory.InFile(opts.Filename, err)
	}
	c, err := opts.Client()
	if err != nil {
		return err
	}
	checked, err := c.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: exp, ValidateOnly: true})
	if err != nil {
		return err
	}
	return opts.Printer().Print(checked, output.Text("manifest is valid"))
}
