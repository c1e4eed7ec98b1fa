package cli

import (
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/iostreams"
)

// TestEveryCommandHasExamples walks the command tree: `--help` of every
// command people can type shows how it is used.
func TestEveryCommandHasExamples(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	f, g := newFactory(ios, func(string) string { return "" })
	root := newCmdRoot(f, g, func(string) string { return "" })
	var missing []string
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		if strings.TrimSpace(c.Example) == "" {
			missing = append(missing, c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("commands without an Example in their --help: %s", strings.Join(missing, ", "))
	}
	if len(root.Commands()) < 10 {
		t.Fatalf("walked %d top-level commands; the tree is not the real one", len(root.Commands()))
	}
}
