package skillcheck

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// tree is a small command tree shaped like falcon's.
func tree() *cobra.Command {
	root := &cobra.Command{Use: "falcon"}
	root.PersistentFlags().StringP("output", "o", "", "")
	root.PersistentFlags().String("jq", "", "")
	exp := &cobra.Command{Use: "exp"}
	get := &cobra.Command{Use: "get ID", Aliases: []string{"show"}, Args: cobra.ExactArgs(1), RunE: func(*cobra.Command, []string) error { return nil }}
	get.Flags().BoolP("watch", "w", false, "")
	logs := &cobra.Command{Use: "logs ID", Args: cobra.ExactArgs(1), RunE: func(*cobra.Command, []string) error { return nil }}
	logs.Flags().Int32("rank", 0, "")
	logs.Flags().Duration("since", 0, "")
	exec := &cobra.Command{Use: "exec ID -- CMD", Args: cobra.MinimumNArgs(2), RunE: func(*cobra.Command, []string) error { return nil }}
	exec.Flags().BoolP("stdin", "i", false, "")
	exec.Flags().BoolP("tty", "t", false, "")
	exp.AddCommand(get, logs, exec)
	root.AddCommand(exp)
	return root
}

func TestCommandsAreFound(t *testing.T) {
	doc := "---\nname: x\ndescription: y\n---\n\n```sh main\n" + strings.Join([]string{
		`EXP=$(falcon exp get "$NAME" -o json --jq .id)`,
		`falcon exp logs "$EXP" --rank 1 | grep -c x > /dev/null 2>&1 && echo ok`,
		`if ! falcon exp get <EXP> -w; then falcon exp get x; fi # falcon in a comment`,
		`falcon exp logs x \`,
		`  --since 5m`,
		`echo "falcon is not a command here"; ls falcon`,
	}, "\n") + "\n```\n\n```yaml\nfalcon: no\n```\n"
	s, err := Parse("skills/x/SKILL.md", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.Commands() {
		got = append(got, c.String())
		if c.Line < 7 || c.Line > 10 {
			t.Errorf("%s: line %d", c, c.Line)
		}
	}
	want := []string{
		"falcon exp get $NAME -o json --jq .id",
		"falcon exp logs $EXP --rank 1",
		"falcon exp get <EXP> -w",
		"falcon exp get x",
		"falcon exp logs x --since 5m",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
	if !strings.Contains(s.Script(), "skills/x/SKILL.md:7") {
		t.Errorf("script lacks where it comes from:\n%s", s.Script())
	}
}

func TestCheck(t *testing.T) {
	badJQ := errors.New("bad expression")
	k := Checker{Root: tree, Values: map[string]func(string) error{"jq": func(v string) error {
		if strings.Contains(v, "[") && !strings.Contains(v, "]") {
			return badJQ
		}
		return nil
	}}}
	tests := []struct {
		line    string
		wantErr string
	}{
		{"falcon exp get exp-q7odgo8q9x -o json", ""},
		{"falcon exp show <EXP>", ""},
		{`falcon exp get "$EXP" -w --jq .status`, ""},
		{"falcon exp logs <EXP> --rank <N> --since 10m", ""},
		{"falcon exp logs x --rank=$N", ""},
		{"falcon exp exec <EXP> -it -- bash -l", ""},
		{"falcon exp lsit", `unknown command "lsit" for "falcon exp"`},
		{"falcon exp", `"falcon exp" is a group`},
		{"falcon exp get x --follow", "unknown flag --follow"},
		{"falcon exp get x -f", "unknown shorthand flag -f"},
		{"falcon exp logs x --rank two", `invalid value "two" for --rank`},
		{"falcon exp logs x --since soon", `invalid value "soon" for --since`},
		{"falcon exp get", "accepts 1 arg(s), received 0"},
		{"falcon exp get a b", "accepts 1 arg(s), received 2"},
		{"falcon exp get x --jq '.items['", `invalid value ".items[" for --jq: bad expression`},
		{"falcon exp logs x --rank", "needs a value"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			cmds := commandsIn(tt.line, 1)
			if len(cmds) != 1 {
				t.Fatalf("found %d commands", len(cmds))
			}
			err := k.Check(cmds[0])
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Check = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Check = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseRefusesWhatAgentsCannotLoad(t *testing.T) {
	for doc, want := range map[string]string{
		"# no front matter\n":                        "no YAML front matter",
		"---\nname: x\n":                             "not closed",
		"---\nname: x\n---\n":                        "lacks description",
		"---\ndescription: y\n---\n":                 "lacks name",
		"---\nname: x\ndescription: y\n---\n```sh\n": "code block not closed",
	} {
		if _, err := Parse("s.md", []byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", doc, err, want)
		}
	}
}
