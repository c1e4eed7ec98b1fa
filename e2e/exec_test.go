package e2e

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// startDevExec is falcon dev with a running experiment of two ranks, real
// processes on this machine.
func startDevExec(t testing.TB, name string) (*dev, string, string) {
	t.Helper()
	d := startDev(t, "")
	exp := d.create(fmt.Sprintf(`name: %s
role_to_task_spec:
  main:
    command: sleep 600
    replica: 2
    device_type: cpu
    envs: {GREETING: hello}
`, name))
	id := exp["id"].(string)
	d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
	return d, id, jobsOf(exp)[0]["id"].(string)
}

// On falcon dev exec runs beside the rank's process, in its environment and
// directory, and cp moves files both ways.
func TestDevExecAndCp(t *testing.T) {
	d, id, job := startDevExec(t, "dev-exec")
	rankDir := filepath.Join(d.dataDir, "run", job, "1")
	for _, tt := range []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout string
	}{
		{name: "the rank's environment", args: []string{"--rank", "1", "--", "sh", "-c", "echo $GREETING $FALCON_RANK $FALCON_WORLD_SIZE; pwd"}, stdout: "hello 1 2\n" + rankDir + "\n"},
		{name: "exit 3", args: []string{"--", "sh", "-c", "exit 3"}, code: 3},
		{name: "killed by SIGKILL", args: []string{"--", "sh", "-c", "kill -9 $$"}, code: 137},
		{name: "stdin", stdin: "abc", args: []string{"-i", "--", "cat"}, stdout: "abc"},
		{name: "a terminal", args: []string{"-t", "--", "sh", "-c", "test -t 0 && echo tty"}, stdout: "tty\r\n"},
		{name: "no command", args: []string{}, code: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := d.with(t).run(tt.stdin, append([]string{"exp", "exec", id}, tt.args...)...)
			if r.code != tt.code || (tt.code == 0 && r.stdout != tt.stdout) {
				t.Errorf("exit %d stdout %q stderr %q; want %d %q", r.code, r.stdout, r.stderr, tt.code, tt.stdout)
			}
		})
	}
	// --all-ranks: every rank at once, each line after its rank, the lowest
	// failing rank's code, the others' failures said on stderr.
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stdout []string // in any order
		stderr string
	}{
		{name: "every rank", args: []string{"--", "sh", "-c", "echo $FALCON_RANK of $FALCON_WORLD_SIZE; printf unended"},
			stdout: []string{"[main/0] 0 of 2", "[main/0] unended", "[main/1] 1 of 2", "[main/1] unended"}},
		{name: "the lowest failing rank's code", args: []string{"--", "sh", "-c", "exit $((FALCON_RANK + 3))"}, code: 3, stderr: "falcon: main/1: command exited with code 4"},
		{name: "not with --rank", args: []string{"--rank", "1", "--", "true"}, code: 2, stderr: "--all-ranks: runs the command in every rank; drop --rank 1"},
		{name: "not with -t", args: []string{"-t", "--", "true"}, code: 2, stderr: "--all-ranks: cannot give several ranks one terminal"},
		{name: "not with -i", args: []string{"-i", "--", "true"}, code: 2, stderr: "--all-ranks: cannot send one stdin to several ranks"},
	} {
		t.Run("all ranks/"+tt.name, func(t *testing.T) {
			r := d.with(t).run("", append([]string{"exp", "exec", id, "--all-ranks"}, tt.args...)...)
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			slices.Sort(lines)
			if r.code != tt.code || tt.stdout != nil && !slices.Equal(lines, tt.stdout) || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("exit %d stdout %q stderr %q; want %d %q %q", r.code, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}

	h := sha256.New()
	if r := d.runTo(h, "exp", "exec", id, "--", "sh", "-c", "head -c 104857600 /dev/zero"); r.code != 0 || fmt.Sprintf("%x", h.Sum(nil)) != fmt.Sprintf("%x", sha256.Sum256(make([]byte, 100<<20))) {
		t.Errorf("100 MiB: exit %d %s", r.code, r.stderr)
	}

	local := t.TempDir()
	big := filepath.Join(local, "data.bin")
	writeRandom(t, big, envMiB(t, "FALCON_CP_MIB", 16))
	tree := filepath.Join(local, "src")
	for p, body := range map[string]string{"x": "1", "d/y": "22", "d/e/z": strings.Repeat("z", 100000)} {
		os.MkdirAll(filepath.Dir(filepath.Join(tree, p)), 0o755)
		writeFile(t, filepath.Join(tree, p), body)
	}
	dst := filepath.Join(t.TempDir(), "remote")
	for _, args := range [][]string{{big, id + ":" + dst + "/a/b/data.bin"}, {tree, id + ":" + dst + "/tree"}, {tree, id + ":" + dst + "/tree"}} {
		if r := d.run("", append([]string{"exp", "cp"}, args...)...); r.code != 0 {
			t.Fatalf("cp %v: %d %s", args, r.code, r.stderr)
		}
	}
	sameFile(t, big, filepath.Join(dst, "a/b/data.bin"))
	// The second copy into an existing directory lands inside it, as cp -r does.
	sameTree(t, tree, filepath.Join(dst, "tree/src"))
	os.RemoveAll(filepath.Join(dst, "tree/src"))
	sameTree(t, tree, filepath.Join(dst, "tree"))
	back := t.TempDir()
	for _, args := range [][]string{{id + ":" + dst + "/a/b/data.bin", back}, {id + ":" + dst + "/tree", back + "/t"}} {
		if r := d.run("", append([]string{"exp", "cp"}, args...)...); r.code != 0 {
			t.Fatalf("cp %v: %d %s", args, r.code, r.stderr)
		}
	}
	sameFile(t, big, filepath.Join(back, "data.bin"))
	sameTree(t, tree, filepath.Join(back, "t"))
	for _, tt := range []struct {
		args   []string
		stderr string
	}{
		{[]string{big, back}, "are local"},
		{[]string{id + ":/a", id + ":/b"}, "are remote"},
		{[]string{id + ":" + dst + "/a/b/data.bin", big, "--all-ranks"}, "--all-ranks: copies from every rank into DST/ROLE-N, one directory each; " + big + " is a file"},
		{[]string{big, id + ":x", "--all-ranks", "--rank", "1"}, "--all-ranks: copies to every rank; drop --rank 1"},
	} {
		if r := d.run("", append([]string{"exp", "cp"}, tt.args...)...); r.code != 2 || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("cp %v: exit %d %s; want 2, %q", tt.args, r.code, r.stderr, tt.stderr)
		}
	}

	// --all-ranks: to every rank; relative paths start in each rank's own
	// directory, which on falcon dev are apart on one machine.
	if r := d.run("", "exp", "cp", big, id+":pushed/data.bin", "--all-ranks"); r.code != 0 {
		t.Fatalf("cp --all-ranks: %d %s", r.code, r.stderr)
	}
	for rank := range 2 {
		sameFile(t, big, filepath.Join(d.dataDir, "run", job, fmt.Sprint(rank), "pushed/data.bin"))
	}
	// A rank that refuses stops the copy there, saying which have theirs.
	writeFile(t, filepath.Join(d.dataDir, "run", job, "1", "blocker"), "a file where rank 1 needs a directory")
	r := d.run("", "exp", "cp", big, id+":blocker/data.bin", "--all-ranks")
	if r.code == 0 || !strings.Contains(r.stderr, "--all-ranks stopped at main/1, 2 of 2 (the one before it has its copy)") {
		t.Errorf("cp --all-ranks with rank 1 refusing: exit %d %s", r.code, r.stderr)
	}
	sameFile(t, big, filepath.Join(d.dataDir, "run", job, "0", "blocker/data.bin"))

	// From every rank: each rank's copy in a directory of its own.
	if r := d.run("", "exp", "exec", id, "--all-ranks", "--", "sh", "-c", "mkdir -p out && echo $FALCON_RANK > out/rank.txt"); r.code != 0 {
		t.Fatalf("exec --all-ranks: %d %s", r.code, r.stderr)
	}
	from := filepath.Join(t.TempDir(), "from")
	if r := d.run("", "exp", "cp", id+":out", from, "--all-ranks"); r.code != 0 {
		t.Fatalf("cp --all-ranks from the ranks: %d %s", r.code, r.stderr)
	}
	for rank := range 2 {
		if got, err := os.ReadFile(filepath.Join(from, fmt.Sprintf("main-%d", rank), "out", "rank.txt")); err != nil || string(got) != fmt.Sprintf("%d\n", rank) {
			t.Errorf("rank %d's copy: %q %v", rank, got, err)
		}
	}
	// A path no rank has: refused, with no empty ROLE-N left behind.
	nothing := filepath.Join(t.TempDir(), "nothing")
	if r := d.run("", "exp", "cp", id+":no-such-path", nothing, "--all-ranks"); r.code != 3 || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("cp --all-ranks of a missing path: exit %d %s; want 3", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(nothing, "main-0")); !os.IsNotExist(err) {
		t.Errorf("a failed copy left %s/main-0 behind: %v", nothing, err)
	}
}
