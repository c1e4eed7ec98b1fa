package extend

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp extend`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	ID  string
	TTL time.Duration
}

// NewCmdExtend builds the command. runF replaces extendRun in tests.
func NewCmdExtend(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "extend ID --ttl DURATION",
		Short: "Set the time an experiment has left before its ttl stops it",
		Long: `Set the time a running experiment has left to --ttl from now, whatever
was left before; on an experiment that has not started yet, set its ttl,
counted from when it runs. An experiment created without a ttl gets one.

Only the experiment's creator or an admin may extend it, up to the
server's --max-ttl; every extend is in the audit log. An experiment that
is ending or has ended cannot be extended (exit 4).`,
		Example: `  falcon exp extend exp-q7odgo8q9x --ttl 1h`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if !cmd.Flags().Changed("ttl") {
				return errdefs.Invalid("--ttl", "is required: the time the experiment has left from now, e.g. --ttl 1h")
			}
			if opts.TTL <= 0 {
				return errdefs.Invalid("--ttl", "must be a positive duration such as 1h or 30m, got %s", opts.TTL)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return extendRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.TTL, "ttl", 0, "Time left from now, e.g. 1h or 90m")
	return cmd
}

func extendRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	exp, err := c.ExtendExp(ctx, &falconv1.ExtendExpRequest{Id: opts.ID, Ttl: durationpb.New(opts.TTL)})
	if err != nil {
		return err
	}
	return opts.Printer().Print(exp, func(v output.View) error {
		_, err := fmt.Fprintf(v.Out, "Experiment %s: %s\n", exp.GetId(), output.TTLLine(v.Now, exp))
		return err
	})
}
