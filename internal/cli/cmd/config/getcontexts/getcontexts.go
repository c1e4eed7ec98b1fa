package getcontexts

import (
	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/contexts"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon config get-contexts`.
type Options struct {
	Contexts func() (*contexts.File, error)
	Printer  func() *output.Printer
}

// Item is one context as the commands of `falcon config` print it.
type Item struct {
	Name    string `json:"name"`
	Server  string `json:"server"`
	Current bool   `json:"current"`
}

// List is what get-contexts prints.
type List struct {
	CurrentContext string `json:"current_context"`
	Items          []Item `json:"items"`
	File           string `json:"file"`
}

// NewCmdGetContexts builds the command. runF replaces getRun in tests.
func NewCmdGetContexts(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Contexts: f.Contexts, Printer: f.Printer}
	return &cobra.Command{
		Use:     "get-contexts",
		Aliases: []string{"contexts"},
		Short:   "List the named servers",
		Example: `  falcon config get-contexts
  falcon config get-contexts -o json | jq -r .current_context`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return getRun(opts)
		},
	}
}

func getRun(opts *Options) error {
	file, err := opts.Contexts()
	if err != nil {
		return err
	}
	c, err := file.Load()
	if err != nil {
		return err
	}
	list := List{CurrentContext: c.CurrentContext, Items: []Item{}, File: file.Path}
	for _, n := range c.Names() {
		list.Items = append(list.Items, Item{Name: n, Server: c.Contexts[n].Server, Current: n == c.CurrentContext})
	}
	doc, err := output.Struct(list)
	if err != nil {
		return err
	}
	return opts.Printer().Print(doc, func(v output.View) error {
		if len(list.Items) == 0 {
			_, err := v.Notes.Write([]byte("No contexts in " + file.Path + "; add one with `falcon config set-context NAME --server URL`.\n"))
			return err
		}
		rows := make([][]string, len(list.Items))
		for i, it := range list.Items {
			cur := ""
			if it.Current {
				cur = "*"
			}
			rows[i] = []string{cur, it.Name, it.Server}
		}
		return output.WriteRows(v, []string{"CURRENT", "NAME", "SERVER"}, rows)
	})
}
