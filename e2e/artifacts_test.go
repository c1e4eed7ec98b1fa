package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// The job writes the awkward cases: an empty file, one byte, nested
// directories, a name with spaces and unicode, and 100 MB of binary (from
// a fixed seed, so the test knows the bytes).
const filesManifest = `
name: %s
role_to_task_spec:
  main:
    command: |
      set -e
      cd "$FALCON_ARTIFACT_DIR"
      : > empty
      printf x > one
      mkdir -p nested/deeper
      echo deep > nested/deeper/file.txt
      echo hi > "name with spaces ü.txt"
      head -c 104857600 /dev/zero | tr '\0' '\377' > big.bin
      %s
    replica: 1
`

func writtenFiles() map[string][]byte {
	return map[string][]byte{
		"empty":                  {},
		"one":                    []byte("x"),
		"nested/deeper/file.txt": []byte("deep\n"),
		"name with spaces ü.txt": []byte("hi\n"),
		"big.bin":                bytes.Repeat([]byte{0xff}, 100<<20),
	}
}

// crcOf is the checksum Falcon reports, computed here independently.
func crcOf(b []byte) string {
	return fmt.Sprintf("crc32c:%08x", crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

type fileList struct {
	Items []struct {
		Path     string `json:"path"`
		Size     string `json:"size"` // int64 is a JSON string in proto3 JSON
		Checksum string `json:"checksum"`
		Updated  string `json:"updated"`
	} `json:"items"`
	NextPageToken string `json:"next_page_token"`
	Complete      bool   `json:"complete"`
}

func (d *dev) ls(args ...string) fileList {
	d.t.Helper()
	r := d.run("", append([]string{"artifact", "ls"}, append(args, "-o", "json")...)...)
	if r.code != 0 {
		d.t.Fatalf("artifact ls %v: exit %d: %s", args, r.code, r.stderr)
	}
	var l fileList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		d.t.Fatalf("artifact ls: %v\n%s", err, r.stdout)
	}
	return l
}

func TestArtifactsComeBackByteForByte(t *testing.T) {
	d := startDev(t, "")
	exp := d.create(fmt.Sprintf(filesManifest, "files-out", "true"))
	id := exp["id"].(string)
	if r := d.run("", "exp", "wait", id, "--timeout", "120s"); r.code != 0 {
		t.Fatalf("wait: %d %s", r.code, r.stderr)
	}
	want := writtenFiles()

	l := d.ls(id)
	if !l.Complete || len(l.Items) != len(want) {
		t.Fatalf("ls after the end: complete=%v, %d files; want complete and %d: %+v", l.Complete, len(l.Items), len(want), l.Items)
	}
	for _, it := range l.Items {
		b, ok := want[it.Path]
		if !ok || it.Checksum != crcOf(b) || it.Size != fmt.Sprintf("%d", len(b)) || it.Updated == "" {
			t.Errorf("ls item %+v; want size %d checksum %s", it, len(b), crcOf(b))
		}
	}
	art := d.mustJSON("exp", "get", id)["artifact"].(map[string]any)
	if !strings.HasPrefix(art["path"].(string), "file:///") || art["file_count"] != "5" || art["index_complete"] != true {
		t.Errorf("exp get's artifact: %v; want a file:// URI and 5 files kept", art)
	}

	// Falcon's own copy of the spec is there, listed only with --all.
	if all := d.ls(id, "--all"); len(all.Items) != len(want)+1 || all.Items[0].Path != ".falcon/experiment.json" {
		t.Errorf("ls --all: %+v", all.Items)
	}
	var spec map[string]any
	if r := d.run("", "artifact", "cat", id, ".falcon/experiment.json"); json.Unmarshal([]byte(r.stdout), &spec) != nil || spec["name"] != "files-out" {
		t.Errorf("the spec copy: %s %s", r.stdout, r.stderr)
	}

	// cat: the bytes, whole.
	for _, p := range []string{"one", "name with spaces ü.txt", "empty", "big.bin"} {
		r := d.run("", "artifact", "cat", id, p)
		if r.code != 0 || r.stdout != string(want[p]) {
			t.Errorf("cat %q: exit %d, %d bytes (%s); want %d bytes", p, r.code, len(r.stdout), r.stderr, len(want[p]))
		}
	}

	// get: everything lands at DIR/<path>; a second run skips them all.
	dir := filepath.Join(t.TempDir(), "out", "new")
	if r := d.run("", "artifact", "get", id, "--to", dir); r.code != 0 {
		t.Fatalf("get: %d %s", r.code, r.stderr)
	}
	for p, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("get %q: %d bytes, %v; want %d", p, len(got), err, len(b))
		}
	}
	again := d.mustJSON("artifact", "get", id, "--to", dir)
	if again["skipped"] != float64(5) {
		t.Errorf("second get: %v; want all 5 skipped", again)
	}

	// An interrupted download resumes: a part file holding the first bytes
	// is continued, and a corrupt one is replaced.
	big := filepath.Join(dir, "big.bin")
	os.Remove(big)
	if err := os.WriteFile(big+".falcon-part", want["big.bin"][:12345], 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "nested/deeper/file.txt")
	os.Remove(bad)
	if err := os.WriteFile(bad+".falcon-part", []byte("XX"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := d.run("", "artifact", "get", id, "big.bin", "nested", "--to", dir); r.code != 0 {
		t.Fatalf("resumed get: %d %s", r.code, r.stderr)
	}
	for _, p := range []string{"big.bin", "nested/deeper/file.txt"} {
		got, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if !bytes.Equal(got, want[p]) {
			t.Errorf("resumed %q: %d bytes; want the file", p, len(got))
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p)) + ".falcon-part"); !os.IsNotExist(err) {
			t.Errorf("part file of %q left behind", p)
		}
	}

	// Prefixes and bad input.
	if l := d.ls(id, "nested/"); len(l.Items) != 1 || l.Items[0].Path != "nested/deeper/file.txt" {
		t.Errorf("ls nested/: %+v", l.Items)
	}
	if l := d.ls(id, "nothing-here/"); len(l.Items) != 0 {
		t.Errorf("ls of an empty prefix: %+v", l.Items)
	}
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"artifact", "cat", id, "missing.txt"}, 3, "missing.txt"},
		{[]string{"artifact", "cat", id, "../../../etc/passwd"}, 2, "leaves the artifact"},
		{[]string{"artifact", "cat", id, "%2e%2e/secret"}, 2, "leaves the artifact"},
		{[]string{"artifact", "cat", id, "/etc/passwd"}, 2, "absolute"},
		{[]string{"artifact", "ls", "exp-0000000000"}, 3, "exp-0000000000"},
		{[]string{"artifact", "get", id, "missing/", "--to", t.TempDir()}, 3, "missing/"},
		{[]string{"artifact", "get", id, "--to", filepath.Join(dir, "one")}, 2, "--to"},
		{[]string{"artifact", "get", id}, 2, "--to"},
	} {
		r := d.run("", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("falcon %v: exit %d, stderr %q; want exit %d naming %q", tc.args, r.code, r.stderr, tc.code, tc.says)
		}
	}
	// A file deleted between ls and cat is NotFound, by name.
	if err := os.Remove(filepath.Join(strings.TrimPrefix(art["path"].(string), "file://"), "one")); err != nil {
		t.Fatal(err)
	}
	if r := d.run("", "artifact", "cat", id, "one"); r.code != 3 || !strings.Contains(r.stderr, "one: no such file") {
		t.Errorf("cat of a deleted file: exit %d %q; want 3 naming it", r.code, r.stderr)
	}
	ro := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(ro, 0o555)
	if os.Geteuid() != 0 { // root writes anywhere
		if r := d.run("", "artifact", "get", id, "--to", ro); r.code != 2 || !strings.Contains(r.stderr, "not writable") {
			t.Errorf("get into a read-only dir: exit %d %q", r.code, r.stderr)
		}
	}
}

// An aborted experiment keeps every file its job wrote, and says so.
func TestAbortedExperimentKeepsItsFiles(t *testing.T) {
	d := startDev(t, "")
	exp := d.create(fmt.Sprintf(filesManifest, "files-abort", "touch done-writing; sleep 600"))
	id := exp["id"].(string)
	d.waitFor(id, "done writing", func(e map[string]any) bool {
		l := d.ls(id)
		for _, it := range l.Items {
			if it.Path == "done-writing" {
				return true
			}
		}
		return false
	})
	if r := d.run("", "exp", "abort", id, "--yes"); r.code != 0 {
		t.Fatalf("abort: %d %s", r.code, r.stderr)
	}
	d.waitFor(id, "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })
	l := d.ls(id)
	if !l.Complete || len(l.Items) != 6 {
		t.Fatalf("after abort: complete=%v %d files; want all 6", l.Complete, len(l.Items))
	}
	r := d.run("", "artifact", "cat", id, "nested/deeper/file.txt")
	if r.code != 0 || r.stdout != "deep\n" {
		t.Errorf("cat after abort: %d %q %s", r.code, r.stdout, r.stderr)
	}
	get := d.run("", "exp", "get", id, "-o", "table")
	if !strings.Contains(get.stdout, "6 files") {
		t.Errorf("exp get after abort does not say what was kept:\n%s", get.stdout)
	}
}

// logs export on falcon dev writes one object per rank and the meta
// document; a rank that never logged is listed as missing, not written.
func TestLogsExport(t *testing.T) {
	d := startDev(t, "")
	exp := d.create("name: export-me\nrole_to_task_spec:\n  main:\n    command: 'if [ $FALCON_RANK = 0 ]; then seq 1 1000; else echo ERROR one; echo fine; fi'\n    replica: 2\n")
	id := exp["id"].(string)
	if r := d.run("", "exp", "wait", id, "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait: %d %s", r.code, r.stderr)
	}
	dir := t.TempDir()
	res := d.mustJSON("exp", "logs", "export", id, "--to", "file://"+dir+"/out")
	if res["total_lines"] != "1002" || len(res["ranks"].([]any)) != 2 {
		t.Errorf("export result: %v", res)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "out", "main-rank-1.log"))
	if string(got) != "ERROR one\nfine\n" {
		t.Errorf("rank 1's object: %q", got)
	}
	meta, err := os.ReadFile(filepath.Join(dir, "out", "collection_meta.json"))
	var m map[string]any
	if err != nil || json.Unmarshal(meta, &m) != nil || m["total_lines"] != "1002" || m["destination"] != "file://"+dir+"/out/" {
		t.Errorf("collection_meta.json: %v %s", err, meta)
	}
	grep := d.mustJSON("exp", "logs", "export", id, "--to", "file://"+dir+"/errors", "--grep", "^ERROR")
	if grep["total_lines"] != "1" {
		t.Errorf("export --grep: %v", grep)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"exp", "logs", "export", id}, "--to"},
		{[]string{"exp", "logs", "export", id, "--to", "s3://x/y"}, "gs:// or file://"},
		{[]string{"exp", "logs", "export", id, "--to", "file://" + dir, "--grep", "(("}, "--grep"},
		{[]string{"exp", "logs", "export", id, "--to", "file://" + dir, "--role", "nope"}, "role"},
	} {
		if r := d.run("", tc.args...); r.code != 2 || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("falcon %v: exit %d %q; want 2 naming %s", tc.args, r.code, r.stderr, tc.says)
		}
	}
}

// On a terminal, `artifact get` shows its progress on stderr, one line
// redrawn in place and left at the totals; piped, it writes none.
func TestArtifactGetShowsProgressOnATerminal(t *testing.T) {
	d := startDev(t, "")
	exp := d.create("name: get-progress\nrole_to_task_spec:\n  main:\n    command: 'head -c 3000000 /dev/zero > $FALCON_ARTIFACT_DIR/a.bin && echo hi > $FALCON_ARTIFACT_DIR/b.txt'\n    replica: 1\n")
	id := exp["id"].(string)
	if r := d.run("", "exp", "wait", id, "--timeout", "120s"); r.code != 0 {
		t.Fatalf("wait: %d %s", r.code, r.stderr)
	}

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	cmd := exec.Command(falconBin, "artifact", "get", id, "--to", filepath.Join(t.TempDir(), "tty"))
	cmd.Env = append(os.Environ(), "FALCON_SERVER=http://"+d.http)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds it; the master reads EOF (EIO) once the child exits
	screen, _ := io.ReadAll(ptmx)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("artifact get on a terminal: %v\n%s", err, screen)
	}
	if !bytes.Contains(screen, []byte("\r\x1b[K")) || !bytes.Contains(screen, []byte("2/2 files, 2.9 MiB/2.9 MiB")) {
		t.Fatalf("no progress drawn on the terminal: %q", screen)
	}
	if strings.Contains(out.String(), "\x1b[K") {
		t.Fatalf("progress went to stdout: %q", out.String())
	}

	r := d.run("", "artifact", "get", id, "--to", filepath.Join(t.TempDir(), "piped"))
	if r.code != 0 || strings.Contains(r.stderr, "\x1b[K") || strings.Contains(r.stderr, "files, ") {
		t.Fatalf("piped: exit %d, stderr %q; want no progress", r.code, r.stderr)
	}
}

// An experiment's files are indexed the moment it ends, without anyone
// listing them: `exp get` says what a run kept, whether it succeeded,
// failed or was aborted. The round that reads running experiments is set to
// an hour, so only the read at the end can have done it.
func TestFilesAreIndexedWhenExperimentsEnd(t *testing.T) {
	d := startDevEnv(t, "", nil, "--results-interval", "1h")
	const manifest = `
name: %s
role_to_task_spec:
  main:
    command: |
      cd "$FALCON_ARTIFACT_DIR"
      echo one > a.txt
      echo '{"step": 1, "loss": 0.5}' > metrics.jsonl
      %s
    replica: 1
`
	ids := map[string]string{} // how it ends -> experiment ID
	for end, tail := range map[string]string{"Succeeded": "true", "Failed": "exit 3", "Aborted": "exec sleep 600"} {
		ids[end] = d.create(fmt.Sprintf(manifest, "index-at-end-"+strings.ToLower(end), tail))["id"].(string)
	}
	d.waitFor(ids["Aborted"], "its files written", func(e map[string]any) bool {
		dir := strings.TrimPrefix(e["artifact"].(map[string]any)["path"].(string), "file://")
		_, err := os.Stat(filepath.Join(dir, "metrics.jsonl"))
		return e["status"] == "Running" && err == nil
	})
	if r := d.run("", "exp", "abort", ids["Aborted"], "--yes"); r.code != 0 {
		t.Fatalf("abort: %d %s", r.code, r.stderr)
	}
	for end, id := range ids {
		exp := d.waitFor(id, end+" and indexed", func(e map[string]any) bool {
			return e["status"] == end && e["artifact"].(map[string]any)["index_complete"] == true
		})
		if art := exp["artifact"].(map[string]any); art["file_count"] != "2" {
			t.Errorf("%s: artifact %v; want 2 files", end, art)
		}
		if get := d.run("", "exp", "get", id, "-o", "table"); !strings.Contains(get.stdout, "(2 files, ") || strings.Contains(get.stdout, "so far") {
			t.Errorf("%s: exp get does not say what was kept:\n%s", end, get.stdout)
		}
	}
}
