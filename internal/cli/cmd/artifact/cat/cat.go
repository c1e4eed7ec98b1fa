package cat

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
)

// Options are the inputs of `falcon artifact cat`.
type Options struct {
	IO     *iostreams.IOStreams
	Client func() (*client.Client, error)

	ExpID string
	Path  string
}

// NewCmdCat builds the command. runF replaces catRun in tests.
func NewCmdCat(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "cat EXP PATH",
		Short: "Write one artifact file to stdout",
		Long: `Write the bytes of one file of the experiment's artifact to stdout, as
they are (no encoding, no size limit), streamed from the server.`,
		Example: `  falcon artifact cat exp-q7odgo8q9x metrics.jsonl | jq .step_time
  falcon artifact cat exp-q7odgo8q9x ckpt/step_1000.bin > ckpt.bin`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ExpID, opts.Path = args[0], args[1]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return catRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func catRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	r, err := c.OpenArtifactFile(ctx, opts.ExpID, opts.Path, 0)
	if err != nil {
		return err
	}
	defer r.Close()
	n, err := io.CopyBuffer(opts.IO.Out, r, make([]byte, 1<<20))
	if err == nil && n != r.Size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		// Unavailable: the connection broke, and a retry may succeed.
		return errdefs.Unavailable("%s: the transfer stopped after %d of %d bytes: %v", opts.Path, n, r.Size, err)
	}
	return nil
}
