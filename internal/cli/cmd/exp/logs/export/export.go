package export

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/since"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp logs export`.
type Options struct {
	Client  func() (*client.Client, error)
	Printer func() *output.Printer
	Now     func() time.Time

	ID    string
	To    string
	Role  string
	Since time.Time // zero: from the start
	Grep  string
}

// NewCmdExport builds the command. runF replaces exportRun in tests.
func NewCmdExport(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Client: f.Client, Printer: f.Printer, Now: f.Clock()}
	var sinceFlag string
	cmd := &cobra.Command{
		Use:   "export ID --to gs://BUCKET/PREFIX",
		Short: "Write every rank's log to a bucket",
		Long: `Write the log of every rank of the experiment to a bucket, one object per
rank (<role>-rank-<N>.log) and collection_meta.json describing them. The
API server streams each log from where it is (the pods, the cluster's
bucket, Cloud Logging) straight into the bucket: nothing passes through
this machine. A rank whose log cannot be read is listed as missing, with
the reason, and the others are still written.`,
		Example: `  falcon exp logs export exp-q7odgo8q9x --to gs://team-results/logs/run-42
  falcon exp logs export exp-q7odgo8q9x --to gs://team-results/logs/run-42 --grep 'ERROR|Traceback' -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if opts.To == "" {
				return errdefs.Invalid("--to", "is required: gs://bucket/prefix to write the logs under")
			}
			if sinceFlag != "" {
				t, err := since.Parse(sinceFlag, opts.Now())
				if err != nil {
					return err
				}
				opts.Since = t
			}
			if opts.Grep != "" {
				if _, err := regexp.Compile(opts.Grep); err != nil {
					return errdefs.Invalid("--grep", "%q is not an RE2 expression: %v", opts.Grep, err)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return exportRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.To, "to", "", "Where to write: gs://bucket/prefix")
	fl.StringVar(&opts.Role, "role", "", "Only this role's ranks")
	fl.StringVar(&sinceFlag, "since", "", "Only lines logged since then: a duration (10m, 2h, 7d) or a time (RFC 3339)")
	fl.StringVar(&opts.Grep, "grep", "", "Only lines matching this RE2 expression")
	return cmd
}

func exportRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	req := &falconv1.ExportExpLogsRequest{Id: opts.ID, To: opts.To, Role: opts.Role, Grep: opts.Grep}
	if !opts.Since.IsZero() {
		req.Since = timestamppb.New(opts.Since)
	}
	res, err := c.ExportExpLogs(ctx, req)
	if err != nil {
		return err
	}
	return opts.Printer().Print(res, func(v output.View) error {
		cols := []output.Column[*falconv1.RankExport]{
			{Header: "ROLE", Value: func(r *falconv1.RankExport) string { return r.GetRole() }},
			{Header: "RANK", Value: func(r *falconv1.RankExport) string { return fmt.Sprint(r.GetRank()) }},
			{Header: "LINES", Value: func(r *falconv1.RankExport) string { return fmt.Sprint(r.GetLines()) }},
			{Header: "SIZE", Value: func(r *falconv1.RankExport) string { return output.Bytes(r.GetBytes()) }},
			{Header: "OBJECT", Value: func(r *falconv1.RankExport) string { return r.GetObject() }},
			{Header: "MISSING", Value: func(r *falconv1.RankExport) string { return r.GetMissing() }},
		}
		if err := output.WriteTable(v.Out, cols, res.GetRanks()); err != nil {
			return err
		}
		_, err := fmt.Fprintf(v.Notes, "Described in %s\n", res.GetMetaObject())
		return err
	})
}
