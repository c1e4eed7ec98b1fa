package xplane

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
)

// File is an XSpace file opened for reading.
type File struct {
	*Reader
	f *os.File
}

// Close closes the file (and removes the decompressed copy of a gzip
// file, which has no name by then).
func (f *File) Close() error { return f.f.Close() }

// OpenOptions tune Open.
type OpenOptions struct {
	// TempDir is where a gzip file is decompressed to; "" is os.TempDir().
	TempDir string
}

// Open opens a .xplane.pb file. XProf writes them uncompressed; a file
// that starts with the gzip magic (as some tools save .xplane.pb.gz) is
// decompressed first into an unnamed temporary file, since a walk jumps
// back and forth within each plane: that costs disk space, not memory.
// A gzip stream that is corrupt is a *CorruptError whose offset counts
// compressed bytes read so far.
func Open(path string, opts OpenOptions) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory, not an XSpace file", path)
	}
	var magic [2]byte
	if n, _ := f.ReadAt(magic[:], 0); n < 2 || magic != [2]byte{0x1f, 0x8b} {
		return &File{Reader: NewReader(path, f, st.Size()), f: f}, nil
	}
	defer f.Close()
	tmp, err := os.CreateTemp(opts.TempDir, "falcon-xplane-*")
	if err != nil {
		return nil, fmt.Errorf("decompressing %s: %w", path, err)
	}
	os.Remove(tmp.Name()) // the file lives until closed, and never outlives the process
	cr := &countingReader{r: f}
	n, err := gunzip(tmp, cr)
	if err != nil {
		tmp.Close()
		var ioe *ioError
		if errors.As(err, &ioe) {
			return nil, fmt.Errorf("decompressing %s: %w", path, ioe.err)
		}
		return nil, &CorruptError{File: path, Offset: cr.n, Detail: "gzip: " + err.Error()}
	}
	r := NewReader(path, tmp, n)
	r.decompressed = true
	return &File{Reader: r, f: tmp}, nil
}

// ioError marks an error of the destination, not of the gzip stream.
type ioError struct{ err error }

func (e *ioError) Error() string { return e.err.Error() }

func gunzip(dst io.Writer, src io.Reader) (int64, error) {
	zr, err := gzip.NewReader(bufio.NewReaderSize(src, 1<<20))
	if err != nil {
		return 0, err
	}
	zr.Multistream(true)
	buf := make([]byte, 1<<20)
	var n int64
	for {
		m, rerr := zr.Read(buf)
		if m > 0 {
			if _, err := dst.Write(buf[:m]); err != nil {
				return n, &ioError{err}
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
