package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// quickStart returns the commands of the README's quick start that run
// against falcon dev: the second sh block of its "Quick start" section,
// one command per line, comments kept (the shell drops them).
func quickStart(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## Quick start\n")
	if i < 0 {
		t.Fatal(`README.md has no "## Quick start" section`)
	}
	s = s[i:]
	var blocks [][]string
	for len(blocks) < 2 {
		start := strings.Index(s, "```sh\n")
		if start < 0 {
			t.Fatalf("README.md's quick start has %d sh blocks, want 2", len(blocks))
		}
		s = s[start+len("```sh\n"):]
		end := strings.Index(s, "```")
		var lines []string
		for _, l := range strings.Split(s[:end], "\n") {
			if strings.TrimSpace(l) != "" {
				lines = append(lines, l)
			}
		}
		blocks = append(blocks, lines)
		s = s[end+3:]
	}
	return blocks[1]
}

// TestReadmeQuickStart runs the README's quick start as a new user types
// it, line by line, in a shell whose PATH holds the falcon just built and
// whose directory holds the repository's examples, against falcon dev.
// Every line must exit 0 and show what its comment promises, so the README
// cannot drift from what Falcon does.
func TestReadmeQuickStart(t *testing.T) {
	cmds := quickStart(t)
	d := startDev(t, "")
	dir := t.TempDir()
	examples, err := filepath.Abs("../examples")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(examples, filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"PATH="+filepath.Dir(falconBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FALCON_SERVER=http://"+d.http)
	out := map[string]string{} // "exp logs" -> what that line printed
	for _, line := range cmds {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "falcon" {
			t.Fatalf("quick start line %q: want a falcon command", line)
		}
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s\n%s: %v", line, b, err)
		}
		out[f[1]+" "+f[2]] = string(b)
	}
	for _, c := range []struct{ cmd, want string }{
		{"exp create", `"id": "exp-`},
		{"exp list", "hello-falcon-001"},
		{"exp wait", `"status": "Succeeded"`},
		{"exp logs", "worker rank 1 done"},
		{"artifact ls", "metrics.jsonl"},
		{"exp metrics", `"step_time_ms"`},
		{"exp get", "Succeeded"},
		{"exp abort", "nothing to abort"},
	} {
		got, ok := out[c.cmd]
		if !ok {
			t.Errorf("the quick start no longer runs falcon %s", c.cmd)
			continue
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("falcon %s printed no %q:\n%s", c.cmd, c.want, got)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "results", "metrics.jsonl")); err != nil {
		t.Errorf("artifact get --to ./results: %v", err)
	}
}
