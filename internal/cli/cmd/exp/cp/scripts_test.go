package cp

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sh runs one of the upload's scripts with this machine's /bin/sh, as the
// rank's shell runs it, and returns its stdout.
func sh(t *testing.T, script string, stdin io.Reader, args ...string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Stdin = stdin
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, errs.String())
	}
	return out.String()
}

// waitSize waits until the file at p holds at least n bytes.
func waitSize(t *testing.T, p string, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(p); err == nil && fi.Size() >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %d bytes", p, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A stream of an upload that the server starts late — its connection was
// cut while its bytes were still on their way, and the copy has resumed
// since — writes what it got into the part file whenever it runs. Whatever
// the order, the part file ends as the source: no stream truncates it.
func TestLateStreamsDoNoHarm(t *testing.T) {
	const size = 6 << 20
	body := randomFile(t, filepath.Join(t.TempDir(), "src"), size)
	want := sumOf(body)
	late := func(part string) { // the first stream, with the 2 MiB it got
		sh(t, sendScript, bytes.NewReader(body[:2<<20]), part, strconv.Itoa(size), "unused-target")
	}
	for _, tt := range []struct {
		name string
		run  func(t *testing.T, part string)
	}{
		{"late after a whole resend", func(t *testing.T, part string) {
			sh(t, sendScript, bytes.NewReader(body), part, strconv.Itoa(size), "unused-target")
			late(part)
		}},
		{"late after a resend and a resume", func(t *testing.T, part string) {
			sh(t, sendScript, bytes.NewReader(body[:3<<20]), part, strconv.Itoa(size), "unused-target")
			off := 3 << 20
			sh(t, resumeScript, bytes.NewReader(body[off:]), part, strconv.Itoa(off/resumeBlock), strconv.Itoa(size-off))
			late(part)
		}},
		{"late in the middle of a resend", func(t *testing.T, part string) {
			cmd := exec.Command("/bin/sh", "-c", sendScript, "sh", part, strconv.Itoa(size), "unused-target")
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if _, err := in.Write(body[:3<<20]); err != nil {
				t.Fatal(err)
			}
			waitSize(t, part, 3<<20)
			late(part)
			if _, err := in.Write(body[3<<20:]); err != nil {
				t.Fatal(err)
			}
			in.Close()
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(out.String()); got != fmt.Sprintf("%d %d", want.crc, want.size) {
				t.Errorf("the resend's own cksum: %q; want %s", got, want)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			part := filepath.Join(t.TempDir(), "f.bin"+partSuffix+"-0000abcd")
			tt.run(t, part)
			got, err := os.ReadFile(part)
			if err != nil {
				t.Fatal(err)
			}
			if s := sumOf(got); s != want {
				t.Errorf("part file: %s; want %s", s, want)
			}
		})
	}
}

// The first stream clears what earlier copies to the same target left,
// and nothing else.
func TestSendClearsOldParts(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "sub", "f.bin")
	mine := target + partSuffix + "-00000001"
	os.MkdirAll(filepath.Dir(target), 0o755)
	for _, p := range []string{target + partSuffix, target + partSuffix + "-0badf00d", target, target + ".keep", filepath.Join(dir, "sub", "g.bin"+partSuffix)} {
		if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sh(t, sendScript, strings.NewReader("new"), mine, "3", target)
	var left []string
	entries, _ := os.ReadDir(filepath.Dir(target))
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if got, want := strings.Join(left, " "), "f.bin f.bin.falcon-part-00000001 f.bin.keep g.bin.falcon-part"; got != want {
		t.Errorf("left: %s; want %s", got, want)
	}
}

func sumOf(b []byte) sum {
	c := newCksum()
	c.Write(b)
	return sum{crc: c.Sum32(), size: int64(len(b))}
}
