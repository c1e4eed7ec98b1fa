package list

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp list`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	Limit     int32
	Cluster   string
	Status    string
	ExpType   string
	Creator   string
	Name      string
	Tags      []string
	PageToken string
}

// NewCmdList builds the command. runF replaces listRun in tests.
func NewCmdList(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List experiments",
		Long: `List experiments, newest first, one page at a time.

--status is matched case-insensitively (running, RUNNING and Running are the
same). --cluster matches experiments pinned to the cluster and, for those that name
none, the cluster their first job was placed on (job list --cluster lists
every job there). Items are experiments without their jobs and artifact
(empty in JSON); exp get ID has them. When more results exist, table output says which --page-token to pass;
JSON output carries it as next_page_token.`,
		Example: `  falcon exp list --limit 10 --cluster v7x-east -o json
  falcon exp list --status failed --creator alice@example.com
  falcon exp list --name 'llama-bench*' --tag nightly -o wide
  falcon exp list --status running -o name`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := factory.CheckLimit(opts.Limit); err != nil {
				return err
			}
			if opts.Status != "" {
				s, err := factory.ParseStatus("--status", lifecycle.ExperimentMachine, opts.Status)
				if err != nil {
					return err
				}
				opts.Status = s
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	factory.AddPageFlags(fl, &opts.Limit, &opts.PageToken, "experiments")
	fl.StringVar(&opts.Cluster, "cluster", "", "Only experiments on this cluster")
	fl.StringVar(&opts.Status, "status", "", "Only experiments with this status (Created, Running, Succeeded, Failed, Aborting, Aborted)")
	fl.StringVar(&opts.ExpType, "type", "", "Only experiments of this type")
	fl.StringVar(&opts.Creator, "creator", "", "Only experiments created by this user (their email, as exp get shows it; me: your own)")
	fl.StringVar(&opts.Name, "name", "", "Only the experiment of this name; with a trailing * (quoted: 'my-run*'), those whose name starts so")
	fl.StringSliceVar(&opts.Tags, "tag", nil, "Only experiments with this tag (repeat or comma-separate: all must be there)")
	factory.SetsField(fl, "cluster", "cluster_name")
	factory.SetsField(fl, "tag", "tags")
	factory.SetsField(fl, "type", "exp_type")
	return cmd
}

func listRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := c.ListExps(ctx, &falconv1.ListExpsRequest{
		PageSize:    opts.Limit,
		PageToken:   opts.PageToken,
		ClusterName: opts.Cluster,
		Status:      opts.Status,
		ExpType:     opts.ExpType,
		Creator:     opts.Creator,
		Name:        opts.Name,
		Tags:        opts.Tags,
	})
	if err != nil {
		return err
	}
	if err := opts.Printer().Print(resp, output.ExperimentList(resp)); err != nil {
		return err
	}
	if len(resp.GetItems()) == 0 && opts.Cluster != "" && opts.PageToken == "" {
		// Nothing on a cluster the server does not know: most likely a
		// typo, which an empty list alone does not tell.
		if _, err := c.GetCluster(ctx, &falconv1.GetClusterRequest{Name: opts.Cluster}); errdefs.Code(err) == codes.NotFound {
			fmt.Fprintf(opts.IO.ErrOut, "No cluster is named %q (falcon cluster list shows those there are).\n", opts.Cluster)
		}
	}
	return nil
}
