package usecontext

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/config/getcontexts"
	"github.com/falconhq/falcon/internal/cli/contexts"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon config use-context`.
type Options struct {
	Contexts func() (*contexts.File, error)
	Printer  func() *output.Printer

	Name string
}

// NewCmdUseContext builds the command. runF replaces useRun in tests.
func NewCmdUseContext(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Contexts: f.Contexts, Printer: f.Printer}
	return &cobra.Command{
		Use:   "use-context NAME",
		Short: "Make a named server the one commands use",
		Long: `Make the context NAME the file's current-context. A context that does
not exist, or names no server, is refused: commands would fail later.
$FALCON_SERVER, $FALCON_CONTEXT, --server and --context still win.`,
		Example: `  falcon config use-context prod
  falcon config use-context dev && falcon exp list`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return useRun(opts)
		},
	}
}

func useRun(opts *Options) error {
	file, err := opts.Contexts()
	if err != nil {
		return err
	}
	c, err := file.Load()
	if err != nil {
		return err
	}
	server, err := c.Server(opts.Name, "NAME", file.Path)
	if err != nil {
		return err
	}
	c.CurrentContext = opts.Name
	if err := file.Save(c); err != nil {
		return err
	}
	doc, err := output.Struct(getcontexts.Item{Name: opts.Name, Server: server, Current: true})
	if err != nil {
		return err
	}
	return opts.Printer().Print(doc, func(v output.View) error {
		_, err := fmt.Fprintf(v.Out, "Using context %s (%s).\n", opts.Name, server)
		return err
	})
}
