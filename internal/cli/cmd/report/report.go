package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/cmd/analyze"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// NewCmdReport returns `falcon report` with ls and cat.
func NewCmdReport(f *factory.Factory) *cobra.Command {
	cmd := factory.Group(&cobra.Command{
		Use: "report <command>",
		Example: `  falcon report ls exp-q7odgo8q9x
  falcon report cat exp-q7odgo8q9x ana-0123456789`,
		Short: "List an experiment's analyses and read their reports",
	})
	cmd.AddCommand(newLs(f), newCat(f))
	return cmd
}

func newLs(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use: "ls EXP",
		Example: `  falcon report ls exp-q7odgo8q9x
  falcon report ls exp-q7odgo8q9x --jq '.items[0].id'`,
		Short: "List the analyses of an experiment, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.Client()
			if err != nil {
				return err
			}
			resp, err := c.ListAnalyses(cmd.Context(), &falconv1.ListAnalysesRequest{ExpId: args[0]})
			if err != nil {
				return err
			}
			return f.Printer().Print(resp, func(v output.View) error {
				if len(resp.GetItems()) == 0 {
					_, err := fmt.Fprintf(v.Notes, "No analyses of %s (falcon analyze ...).\n", args[0])
					return err
				}
				cols := []output.Column[*falconv1.Analysis]{
					{Header: "REPORT", Value: func(a *falconv1.Analysis) string { return a.GetId() }},
					{Header: "KIND", Value: func(a *falconv1.Analysis) string { return a.GetKind() }},
					{Header: "EXPERIMENTS", Value: func(a *falconv1.Analysis) string { return strings.Join(a.GetExpIds(), ",") }},
					{Header: "STATUS", Value: func(a *falconv1.Analysis) string { return a.GetStatus() }},
					{Header: "AGE", Value: func(a *falconv1.Analysis) string { return output.Age(v.Now, a.GetCreatedAt()) }},
					{Header: "MESSAGE", Value: func(a *falconv1.Analysis) string { return a.GetMessage() }},
				}
				return output.WriteTable(v.Out, cols, resp.GetItems())
			})
		},
	}
}

func newCat(f *factory.Factory) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use: "cat EXP REPORT [--format md|json]",
		Example: `  falcon report cat exp-q7odgo8q9x ana-0123456789
  falcon report cat exp-q7odgo8q9x ana-0123456789 --format json | jq .summary`,
		Short: "Print an analysis' report",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "md" && format != "json" {
				return errdefs.Invalid("--format", "%q is not a report format; allowed: md, json", format)
			}
			ctx := cmd.Context()
			c, err := f.Client()
			if err != nil {
				return err
			}
			a, err := c.GetAnalysis(ctx, &falconv1.GetAnalysisRequest{Id: args[1]})
			if err != nil {
				return err
			}
			if !slices.Contains(a.GetExpIds(), args[0]) {
				return errdefs.NotFoundf("report %s is not an analysis of %s (it analysed %s); falcon report ls %s lists them", args[1], args[0], strings.Join(a.GetExpIds(), ", "), args[0])
			}
			if a.GetStatus() != "Succeeded" {
				return errdefs.Precondition("analysis %s is %s: %s", a.GetId(), a.GetStatus(), a.GetMessage())
			}
			return analyze.CatReport(ctx, c, f.IOStreams.Out, a.GetExpIds()[0], a.GetId(), format)
		},
	}
	cmd.Flags().StringVar(&format, "format", "md", "md or json")
	return cmd
}
