package ls

import (
	"context"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon artifact ls`.
type Options struct {
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	ExpID     string
	Prefix    string
	All       bool
	Limit     int32
	PageToken string
}

// NewCmdLs builds the command. runF replaces lsRun in tests.
func NewCmdLs(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:     "ls EXP [PREFIX]",
		Aliases: []string{"list"},
		Short:   "List the files of an experiment's artifact",
		Long: `List every file the experiment's job wrote: path (relative to the
artifact), size, checksum and time. Files Falcon adds itself sit under
.falcon/ and are listed only with --all.

Without --limit every page is fetched; with it, one page, and
next_page_token says where the next begins. Once the experiment has ended
(and exp wait has returned) the listing is complete.`,
		Example: `  falcon artifact ls exp-q7odgo8q9x
  falcon artifact ls exp-q7odgo8q9x profiles/ -o json | jq -r '.items[].path'`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ExpID = args[0]
			if len(args) == 2 {
				opts.Prefix = args[1]
			}
			if err := factory.CheckLimit(opts.Limit); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return lsRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&opts.All, "all", "a", false, "Also list the files Falcon adds itself, under .falcon/")
	factory.AddPageFlags(fl, &opts.Limit, &opts.PageToken, "files (0: every file)")
	return cmd
}

func lsRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	req := &falconv1.ListArtifactFilesRequest{ExpId: opts.ExpID, Prefix: opts.Prefix, All: opts.All, PageSize: opts.Limit, PageToken: opts.PageToken}
	out := &falconv1.ListArtifactFilesResponse{}
	for {
		resp, err := c.ListArtifactFiles(ctx, req)
		if err != nil {
			return err
		}
		out.Items = append(out.Items, resp.GetItems()...)
		out.Complete = resp.GetComplete()
		out.NextPageToken = resp.GetNextPageToken()
		if opts.Limit > 0 || out.NextPageToken == "" {
			break
		}
		req.PageToken = out.NextPageToken
	}
	return opts.Printer().Print(out, output.FileList(out))
}
