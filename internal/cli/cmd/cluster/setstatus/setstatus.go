package setstatus

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/clusterconfig"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon cluster set-status`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	Name   string
	Status string
}

// NewCmdSetStatus builds the command. runF replaces setStatusRun in tests.
func NewCmdSetStatus(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	return &cobra.Command{
		Use:   "set-status NAME {active|maintenance|offline}",
		Short: "Take a cluster in or out of service",
		Long: `Set a cluster's status. Only an active cluster receives new jobs; one in
maintenance or offline keeps running the jobs it has.

A status set here lasts until the next ` + "`falcon cluster apply`" + `, which sets
every cluster to the status its file gives (active when it gives none).`,
		Example: `  falcon cluster set-status tpu-east maintenance
  falcon cluster set-status tpu-east active`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			st, err := parseStatus(args[1])
			if err != nil {
				return err
			}
			opts.Status = st
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return setStatusRun(cmd.Context(), opts)
		},
	}
}

// parseStatus matches the status case-insensitively, as the other status
// arguments of the CLI do.
func parseStatus(s string) (string, error) {
	for _, st := range clusterconfig.Statuses {
		if strings.EqualFold(st, strings.TrimSpace(s)) {
			return st, nil
		}
	}
	return "", errdefs.Invalid("STATUS", "%q is not a cluster status; allowed: %s", s, strings.Join(clusterconfig.Statuses, ", "))
}

func setStatusRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	out, err := c.SetClusterStatus(ctx, &falconv1.SetClusterStatusRequest{Name: opts.Name, Status: opts.Status})
	if err != nil {
		return err
	}
	return opts.Printer().Print(out, func(v output.View) error {
		fmt.Fprintf(v.Out, "Cluster %s is %s\n", out.GetName(), out.GetStatus())
		if out.GetStatus() != "active" {
			fmt.Fprintln(v.Notes, "It receives no new jobs; jobs already on it keep running.")
		}
		return nil
	})
}
