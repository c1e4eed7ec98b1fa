package cp

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// entry is one thing under a directory being sent.
type entry struct {
	rel  string // slash-separated, relative to the directory; "" is the directory itself
	info fs.FileInfo
	link string // a symlink's target
	sum  *sum   // a regular file's cksum, once it has been read whole
}

// tree is a local directory, walked once.
type tree struct{ entries []*entry }

func walk(root string) (*tree, error) {
	t := &tree{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			rel = ""
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := &entry{rel: filepath.ToSlash(rel), info: info}
		if info.Mode()&fs.ModeSymlink != 0 {
			if e.link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		t.entries = append(t.entries, e)
		return nil
	})
	return t, err
}

// dirs are the tree's directories: sent again before files resent, so
// that a file's directory exists with its mode.
func (t *tree) dirs() []*entry {
	var out []*entry
	for _, e := range t.entries {
		if e.info.IsDir() {
			out = append(out, e)
		}
	}
	return out
}

// missing are the regular files whose cksum on the far side (got) is not
// theirs, or not known here because they were never read whole.
func (t *tree) missing(got map[string]sum) []*entry {
	var out []*entry
	for _, e := range t.entries {
		if !e.info.Mode().IsRegular() {
			continue
		}
		if s, ok := got[e.rel]; !ok || e.sum == nil || s != *e.sum {
			out = append(out, e)
		}
	}
	return out
}

// writeTar writes entries of the directory root as a tar stream whose
// names start with name, and notes each regular file's cksum as it goes.
func writeTar(w io.Writer, root, name string, entries []*entry) error {
	cw := &countWriter{w: w}
	tw := tar.NewWriter(cw)
	buf := make([]byte, 1<<20)
	for _, e := range entries {
		h, err := tar.FileInfoHeader(e.info, e.link)
		if err != nil {
			return err
		}
		h.Name = name
		if e.rel != "" {
			h.Name = name + "/" + e.rel
		}
		if e.info.IsDir() {
			h.Name += "/"
		}
		// Owners mean nothing on the far side, and a name lookup is slow.
		h.Uname, h.Gname, h.Uid, h.Gid = "", "", 0, 0
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !e.info.Mode().IsRegular() {
			continue
		}
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(e.rel)))
		if err != nil {
			return err
		}
		c := newCksum()
		n, err := io.CopyBuffer(io.MultiWriter(tw, c), io.LimitReader(f, h.Size), buf)
		f.Close()
		if err != nil {
			return err
		}
		if n != h.Size {
			return fmt.Errorf("%s shrank while it was sent", e.rel)
		}
		e.sum = &sum{crc: c.Sum32(), size: n}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	// tar on the far side reads whole records of 20 blocks and stops at
	// the record holding the end marker: pad to one, as tar itself writes,
	// so it ends without waiting for stdin to close.
	_, err := w.Write(make([]byte, (tarRecord-int(cw.n%tarRecord))%tarRecord))
	return err
}

// tarRecord is tar's default record: 20 blocks of 512 bytes.
const tarRecord = 20 * 512

// countWriter counts what goes through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// readTar extracts a tar stream into target, noting each regular file's
// cksum in got (relative, slash-separated names). Names that would leave
// target are refused.
func readTar(r io.Reader, target string, got map[string]sum) error {
	tr := tar.NewReader(r)
	buf := make([]byte, 1<<20)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if strings.HasPrefix(h.Name, "/") || slices.Contains(strings.Split(h.Name, "/"), "..") {
			return fmt.Errorf("the far side's tar names %q, outside the directory", h.Name)
		}
		p := filepath.Join(target, filepath.FromSlash(rel))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			_ = os.Chmod(p, fs.FileMode(h.Mode).Perm()|0o700)
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fs.FileMode(h.Mode).Perm()|0o600)
			if err != nil {
				return err
			}
			c := newCksum()
			n, err := io.CopyBuffer(io.MultiWriter(f, c), tr, buf)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			got[rel] = sum{crc: c.Sum32(), size: n}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			_ = os.Remove(p)
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		}
	}
}
