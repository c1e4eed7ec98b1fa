package skillcheck

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Checker checks command lines against a command tree.
type Checker struct {
	// Root builds a fresh command tree (flag values are set while
	// checking, so each check gets its own).
	Root func() *cobra.Command
	// Values checks the values of flags beyond what their type parses,
	// by flag name (--jq's expression compiles).
	Values map[string]func(string) error
}

// Check returns what is wrong with c, or nil.
func (k Checker) Check(c Command) error {
	if len(c.Words) == 0 || c.Words[0].Text != "falcon" {
		return fmt.Errorf("not a falcon command")
	}
	root := k.Root()
	cmd := root
	words := c.Words[1:]
	for len(words) > 0 && !strings.HasPrefix(words[0].Text, "-") {
		next := findSub(cmd, words[0].Text)
		if next == nil {
			break
		}
		cmd, words = next, words[1:]
	}
	if !cmd.Runnable() {
		if len(words) > 0 && !strings.HasPrefix(words[0].Text, "-") {
			return fmt.Errorf("unknown command %q for %q", words[0].Text, cmd.CommandPath())
		}
		return fmt.Errorf("%q is a group of commands, not a command", cmd.CommandPath())
	}
	var positional []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w.Text == "--":
			for _, r := range words[i+1:] {
				positional = append(positional, r.Text)
			}
			i = len(words)
		case strings.HasPrefix(w.Text, "--"):
			name, value, hasValue := strings.Cut(strings.TrimPrefix(w.Text, "--"), "=")
			fl := lookup(cmd, name, "")
			if fl == nil {
				return fmt.Errorf("unknown flag --%s for %q", name, cmd.CommandPath())
			}
			if !hasValue && !isBool(fl) {
				if i+1 >= len(words) {
					return fmt.Errorf("flag --%s needs a value", name)
				}
				i++
				value, hasValue = words[i].Text, true
				if words[i].Placeholder {
					continue
				}
			} else if hasValue && w.Placeholder {
				continue
			}
			if hasValue {
				if err := k.set(fl, value); err != nil {
					return err
				}
			}
		case strings.HasPrefix(w.Text, "-") && len(w.Text) > 1:
			shorts := w.Text[1:]
			for j := 0; j < len(shorts); j++ {
				fl := lookup(cmd, "", shorts[j:j+1])
				if fl == nil {
					return fmt.Errorf("unknown shorthand flag -%s for %q", shorts[j:j+1], cmd.CommandPath())
				}
				if isBool(fl) {
					continue
				}
				value, ph := shorts[j+1:], w.Placeholder
				if value == "" {
					if i+1 >= len(words) {
						return fmt.Errorf("flag -%s needs a value", shorts[j:j+1])
					}
					i++
					value, ph = words[i].Text, words[i].Placeholder
				}
				if !ph {
					if err := k.set(fl, value); err != nil {
						return err
					}
				}
				break
			}
		default:
			positional = append(positional, w.Text)
		}
	}
	if cmd.Args != nil {
		if err := cmd.Args(cmd, positional); err != nil {
			return fmt.Errorf("%s: %v", cmd.CommandPath(), err)
		}
	}
	return nil
}

func (k Checker) set(fl *pflag.Flag, value string) error {
	if err := fl.Value.Set(value); err != nil {
		return fmt.Errorf("invalid value %q for --%s: %v", value, fl.Name, err)
	}
	if check := k.Values[fl.Name]; check != nil {
		if err := check(value); err != nil {
			return fmt.Errorf("invalid value %q for --%s: %v", value, fl.Name, err)
		}
	}
	return nil
}

func findSub(cmd *cobra.Command, name string) *cobra.Command {
	for _, sub := range cmd.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// lookup finds a flag of cmd, its own or inherited, by name or shorthand.
func lookup(cmd *cobra.Command, name, short string) *pflag.Flag {
	for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.InheritedFlags()} {
		var fl *pflag.Flag
		if name != "" {
			fl = fs.Lookup(name)
		} else {
			fl = fs.ShorthandLookup(short)
		}
		if fl != nil {
			return fl
		}
	}
	return nil
}

func isBool(fl *pflag.Flag) bool { return fl.NoOptDefVal != "" }
