package diff

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/compare"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp diff`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	IDs []string
	All bool
}

// NewCmdDiff builds the command. runF replaces diffRun in tests.
func NewCmdDiff(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "diff A B [C...]",
		Short: "Show what differs between experiments' configs and specs",
		Long: fmt.Sprintf(`Show what differs between experiments: their type, tags, cluster, ttl,
each role's command, image, replicas, devices, envs and resources, and
their configs. A config that parses as YAML or JSON is compared key by key
(optimizer.lr, layers[3].remat); otherwise line by line.

One row per key that differs (every key with --all), one column per
experiment; a key an experiment does not have shows as -. -o md prints a
Markdown table to paste into a review; -o json gives
{"experiments", "config_mode", "rows": [{"key", "values", "present",
"differs"}]}. At most %d experiments.`, compare.MaxExperiments),
		Example: `  falcon exp diff exp-q7odgo8q9x exp-3kd9vb02ma
  falcon exp diff exp-q7odgo8q9x exp-3kd9vb02ma -o md`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := compare.CheckIDs(args); err != nil {
				return errdefs.Invalid("arguments", "%v", err)
			}
			opts.IDs = args
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return diffRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "Show every key, also those that are the same")
	return cmd
}

func diffRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	exps := make([]*falconv1.Experiment, len(opts.IDs))
	for i, id := range opts.IDs {
		if exps[i], err = c.GetExp(ctx, &falconv1.GetExpRequest{Id: id}); err != nil {
			return err
		}
	}
	d := compare.Specs(exps, opts.All)
	msg, err := output.Struct(d)
	if err != nil {
		return err
	}
	return opts.Printer().Print(msg, func(v output.View) error {
		if len(d.Rows) == 0 {
			_, err := fmt.Fprintf(v.Notes, "No differences between %s (--all shows every key).\n", strings.Join(opts.IDs, ", "))
			return err
		}
		headers := append([]string{"KEY"}, opts.IDs...)
		rows := make([][]string, len(d.Rows))
		for i, r := range d.Rows {
			rows[i] = append([]string{r.Key}, cells(r)...)
		}
		return output.WriteRows(v, headers, rows)
	})
}

// cells are a row's values, - where an experiment lacks the key. Where
// they differ and span lines (a role's command), each is shown from the
// first line on which they differ: a table cell shows one line, and the
// first lines of two scripts are usually the same.
func cells(r compare.Row) []string {
	n := firstDifferingLine(r)
	out := make([]string, len(r.Values))
	for i, v := range r.Values {
		switch {
		case !r.Present[i]:
			out[i] = "-"
		case v == "":
			out[i] = `""`
		case n >= 0:
			lines := strings.Split(v, "\n")
			if n < len(lines) {
				out[i] = fmt.Sprintf("line %d: %s", n+1, lines[n])
			} else {
				out[i] = fmt.Sprintf("line %d: (it ends at line %d)", n+1, len(lines))
			}
		default:
			out[i] = v
		}
	}
	return out
}

// firstDifferingLine is the index of the first line on which the row's
// present values differ, or -1 where none spans lines or they do not
// differ.
func firstDifferingLine(r compare.Row) int {
	var split [][]string
	multi := false
	for i, v := range r.Values {
		if r.Present[i] {
			split = append(split, strings.Split(v, "\n"))
			multi = multi || strings.Contains(v, "\n")
		}
	}
	if !multi || len(split) < 2 {
		return -1
	}
	for n := 0; ; n++ {
		line, seen, ended := "", false, false
		for _, lines := range split {
			switch {
			case n >= len(lines):
				ended = true
			case !seen:
				line, seen = lines[n], true
			case lines[n] != line:
				return n
			}
		}
		switch {
		case !seen:
			return -1 // all ended here, alike
		case ended:
			return n // some end here, others go on
		}
	}
}
