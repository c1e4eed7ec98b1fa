package list

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon cluster list`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer
}

// NewCmdList builds the command. runF replaces listRun in tests.
func NewCmdList(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List clusters",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
}

func listRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := c.ListClusters(ctx, &falconv1.ListClustersRequest{})
	if err != nil {
		return err
	}
	// The probes only shape the table: -o json is the registry as stored.
	// A server without them (older) lists the statuses alone.
	probes := map[string]*falconv1.ClusterProbe{}
	if pr, err := c.ListClusterProbes(ctx, &falconv1.ListClusterProbesRequest{}); err == nil {
		for _, p := range pr.GetItems() {
			probes[p.GetCluster()] = p
		}
	}
	return opts.Printer().Print(resp, func(v output.View) error {
		if len(resp.GetItems()) == 0 {
			return output.ClusterList(resp)(v)
		}
		cols := output.ClusterColumns(v)
		for i, col := range cols {
			if col.Header == "STATUS" {
				cols[i].Value = func(c *falconv1.Cluster) string { return Status(v.Now, c, probes[c.GetName()]) }
			}
		}
		return output.WriteTable(v.Out, cols, resp.GetItems())
	})
}

// Status is a cluster's status as the list shows it: an active cluster
// whose last probe failed is not shown as plainly active.
func Status(now time.Time, c *falconv1.Cluster, p *falconv1.ClusterProbe) string {
	if c.GetStatus() != "active" || p == nil || p.GetReachable() {
		return c.GetStatus()
	}
	return fmt.Sprintf("active (unreachable %s ago)", output.Age(now, p.GetProbedAt()))
}
