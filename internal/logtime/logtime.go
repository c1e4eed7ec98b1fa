package logtime

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"sort"
	"sync"
	"time"
)

// Suffix names a log's index: LOG + Suffix.
const Suffix = ".ts"

// recordSize is one record: size, then Unix nanoseconds.
const recordSize = 16

// Recorder appends to a log's index whenever the log has grown.
type Recorder struct {
	log, index *os.File
	mu         sync.Mutex
	last       int64
	now        func() time.Time
}

// NewRecorder records the growth of log into index (opened for appending).
// A record of the log's current size comes first, so lines already there
// are dated no later than the recorder's start.
func NewRecorder(log, index *os.File) (*Recorder, error) {
	r := &Recorder{log: log, index: index, last: -1, now: time.Now}
	return r, r.Mark()
}

// Mark records the log's size now, if it grew since the last record.
func (r *Recorder) Mark() error {
	st, err := r.log.Stat()
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if st.Size() <= r.last {
		return nil
	}
	var rec [recordSize]byte
	binary.LittleEndian.PutUint64(rec[:8], uint64(st.Size()))
	binary.LittleEndian.PutUint64(rec[8:], uint64(r.now().UnixNano()))
	if _, err := r.index.Write(rec[:]); err != nil {
		return err
	}
	r.last = st.Size()
	return nil
}

// Reader dates the lines of a log from its index, reading what was
// appended to the index as later lines need it.
type Reader struct {
	f     *os.File // nil: the log has no index
	sizes []int64
	times []int64
	off   int64 // bytes of f read
}

// Open opens the index of the log at path. A log without one (written by
// an older falcon dev) gets a Reader that dates nothing.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path + Suffix)
	if errors.Is(err, fs.ErrNotExist) {
		return &Reader{}, nil
	}
	if err != nil {
		return nil, err
	}
	return &Reader{f: f}, nil
}

// Indexed reports whether the log has an index: then a line At cannot
// date yet was written after the last record, that is just now.
func (r *Reader) Indexed() bool { return r.f != nil }

// Close closes the index.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	return r.f.Close()
}

// At is when the log first held end bytes: the time of a line that ends
// there. ok is false when no record reaches end yet, or there is no index.
func (r *Reader) At(end int64) (t time.Time, ok bool) {
	if r.f == nil {
		return time.Time{}, false
	}
	if n := len(r.sizes); n == 0 || r.sizes[n-1] < end {
		r.more()
	}
	i := sort.Search(len(r.sizes), func(i int) bool { return r.sizes[i] >= end })
	if i == len(r.sizes) {
		return time.Time{}, false
	}
	return time.Unix(0, r.times[i]), true
}

// more reads the records appended since the last read; a record half
// written is left for the next.
func (r *Reader) more() {
	buf := make([]byte, 64*recordSize)
	for {
		n, err := r.f.ReadAt(buf, r.off)
		n -= n % recordSize
		for p := 0; p < n; p += recordSize {
			size := int64(binary.LittleEndian.Uint64(buf[p:]))
			at := int64(binary.LittleEndian.Uint64(buf[p+8:]))
			if k := len(r.sizes); k > 0 && size <= r.sizes[k-1] {
				continue // sizes only grow: a stale record dates nothing
			}
			r.sizes, r.times = append(r.sizes, size), append(r.times, at)
		}
		r.off += int64(n)
		if err != nil || n < len(buf) {
			return // the end for now (io.EOF), or an error the next call meets again
		}
	}
}
