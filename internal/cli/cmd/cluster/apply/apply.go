package apply

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

// Options are the inputs of `falcon cluster apply`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	// Filename is the clusters file; "-" is stdin.
	Filename string
	Prune    bool
	DryRun   bool
}

// NewCmdApply builds the command. runF replaces applyRun in tests.
func NewCmdApply(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "apply -f FILE [--prune] [--dry-run]",
		Short: "Make the cluster registry match a clusters file",
		Long: `Make the cluster registry match a clusters file: create the clusters it
lists that are not registered, update those that differ, and take offline
the registered clusters it does not list. With --prune those are deleted
instead, except clusters that jobs which have not finished still run on:
they are taken offline and reported so.

The file is checked first, and any problem refuses all of it: nothing is
written. --dry-run shows what would change and writes nothing.

The table lists every cluster with its action (created, updated,
unchanged, offline or deleted) and, for an update, the fields that change.
The file's top-level selection: (spread, the default, or priority) is the
policy that places jobs on the clusters; a change of it is reported after
the table. With -o json the ApplyClustersResponse is printed. See
examples/clusters.yaml for the file's layout.`,
		Example: `  falcon cluster apply -f clusters.yaml --dry-run
  falcon cluster apply -f clusters.yaml
  falcon cluster apply -f clusters.yaml --prune`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Filename == "" {
				return errdefs.Invalid("-f/--filename", "required: the clusters file to apply (- reads stdin)")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return applyRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Filename, "filename", "f", "", "Clusters file (YAML); - reads stdin")
	fl.BoolVar(&opts.Prune, "prune", false, "Delete registered clusters the file does not list (if no unfinished jobs use them)")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "Show what would change; write nothing")
	return cmd
}

func applyRun(ctx context.Context, opts *Options) error {
	data, err := factory.ReadFlagFile(opts.IO, "--filename", opts.Filename)
	if err != nil {
		return err
	}
	reg, err := clusterconfig.ParseRegistry(data)
	if err != nil {
		return factory.InFile(opts.Filename, err)
	}
	c, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := c.ApplyClusters(ctx, &falconv1.ApplyClustersRequest{Clusters: reg.Clusters, Selection: reg.Selection, Prune: opts.Prune, DryRun: opts.DryRun})
	if err != nil {
		return err
	}
	return opts.Printer().Print(resp, changesView(resp, opts))
}

var changeColumns = []output.Column[*falconv1.ClusterChange]{
	{Header: "NAME", Value: func(c *falconv1.ClusterChange) string { return c.GetName() }},
	{Header: "ACTION", Value: func(c *falconv1.ClusterChange) string { return c.GetAction() }},
	{Header: "FIELDS", Value: func(c *falconv1.ClusterChange) string { return strings.Join(c.GetFields(), ",") }},
}

// changesView is the table of changes, with a summary and what to do next
// on the notes stream.
func changesView(resp *falconv1.ApplyClustersResponse, opts *Options) output.TableFunc {
	return func(v output.View) error {
		if err := output.WriteTable(v.Out, changeColumns, resp.GetChanges()); err != nil {
			return err
		}
		count := map[string]int{}
		var offline []string
		for _, c := range resp.GetChanges() {
			count[c.GetAction()]++
			if c.GetAction() == "offline" {
				offline = append(offline, c.GetName())
			}
		}
		var parts []string
		for _, a := range []string{"created", "updated", "unchanged", "offline", "deleted"} {
			if count[a] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", count[a], a))
			}
		}
		if prev := resp.GetPreviousSelection(); prev != "" {
			parts = append(parts, fmt.Sprintf("selection %s (was %s)", resp.GetSelection(), prev))
		}
		if opts.DryRun {
			fmt.Fprintf(v.Notes, "Dry run: would be %s; nothing was written.\n", strings.Join(parts, ", "))
		} else {
			fmt.Fprintf(v.Notes, "Applied: %s.\n", strings.Join(parts, ", "))
		}
		switch {
		case len(offline) > 0 && opts.Prune:
			fmt.Fprintf(v.Notes, "Not deleted, because jobs that have not finished use them (taken offline instead): %s. Apply with --prune again once they end.\n",
				strings.Join(offline, ", "))
		case len(offline) > 0:
			fmt.Fprintf(v.Notes, "Not in the file, so offline: %s. They receive no new jobs; --prune deletes them.\n", strings.Join(offline, ", "))
		}
		return nil
	}
}
