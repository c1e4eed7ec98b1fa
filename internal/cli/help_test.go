package cli

import (
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/skillcheck"
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

// TestExamplesMatchTheCommands holds every Example line that runs falcon
// to the command tree, as the skills are: an example with a flag that does
// not exist teaches the wrong thing.
func TestExamplesMatchTheCommands(t *testing.T) {
	checker := skillcheck.Checker{Root: CommandTree, Values: map[string]func(string) error{
		"jq": func(v string) error { _, err := output.ParseQuery(v); return err },
	}}
	n := 0
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		doc := "---\nname: x\ndescription: x\n---\n```sh\n" + c.Example + "\n```\n"
		s, err := skillcheck.Parse(c.CommandPath(), []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range s.Commands() {
			n++
			if err := checker.Check(cmd); err != nil {
				t.Errorf("%s: example %s: %v", c.CommandPath(), cmd, err)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(CommandTree())
	if n < 80 {
		t.Errorf("checked %d example lines; the walk missed some", n)
	}
}
