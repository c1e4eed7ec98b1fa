package setcontext

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/config/getcontexts"
	"github.com/falconhq/falcon/internal/cli/contexts"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon config set-context`.
type Options struct {
	Contexts func() (*contexts.File, error)
	Printer  func() *output.Printer

	Name   string
	Server string
	Use    bool
}

// NewCmdSetContext builds the command. runF replaces setRun in tests.
func NewCmdSetContext(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Contexts: f.Contexts, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "set-context NAME --server URL [--use]",
		Short: "Add a named server, or change its URL",
		Long: `Add the context NAME with its server, or change the server of an
existing one. --use also makes it the current context. The server is
checked to be a URL; it is not called.`,
		Example: `  falcon config set-context prod --server https://falcon.example.com --use
  falcon config set-context dev --server http://127.0.0.1:7070`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Name = args[0]
			if opts.Server == "" {
				return errdefs.Invalid("--server", "is required: the URL of the Falcon API server this context names")
			}
			server, err := client.NormalizeServer(opts.Server)
			if err != nil {
				return errdefs.Invalid("--server", "%v", err)
			}
			opts.Server = server
			if runF != nil {
				return runF(opts)
			}
			return setRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Server, "server", "", "URL of the Falcon API server (required)")
	cmd.Flags().BoolVar(&opts.Use, "use", false, "Also make it the current context")
	return cmd
}

func setRun(opts *Options) error {
	file, err := opts.Contexts()
	if err != nil {
		return err
	}
	c, err := file.Load()
	if err != nil {
		return err
	}
	c.Contexts[opts.Name] = &contexts.Context{Server: opts.Server}
	if opts.Use {
		c.CurrentContext = opts.Name
	}
	if err := file.Save(c); err != nil {
		return err
	}
	item := getcontexts.Item{Name: opts.Name, Server: opts.Server, Current: c.CurrentContext == opts.Name}
	doc, err := output.Struct(item)
	if err != nil {
		return err
	}
	return opts.Printer().Print(doc, func(v output.View) error {
		msg := fmt.Sprintf("Context %s is %s", opts.Name, opts.Server)
		if item.Current {
			msg += " (current)"
		}
		_, err := fmt.Fprintln(v.Out, msg+".")
		return err
	})
}
