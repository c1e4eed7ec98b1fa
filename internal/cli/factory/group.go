package factory

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Group makes cmd a command that only groups subcommands (`falcon exp`).
// Cobra treats a non-runnable command given an unknown subcommand as a
// request for help and exits 0, so a typo like `falcon exp lsit` would look
// like success to a script; here it is a usage error instead.
func Group(cmd *cobra.Command) *cobra.Command {
	cmd.SuggestionsMinimumDistance = 2
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return fmt.Errorf("%s", msg)
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	return cmd
}
