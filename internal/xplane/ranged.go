package xplane

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// RangeOpener opens an object's bytes from offset off to its end, e.g.
// with gocloud.dev/blob's Bucket.NewRangeReader(ctx, key, off, -1, nil).
type RangeOpener func(off int64) (io.ReadCloser, error)

// maxDiscard is how far forward a read may jump and still be served from
// the open stream, by reading and dropping the bytes in between, rather
// than by opening another.
const maxDiscard = 4 << 20

// RangeReaderAt reads an object in storage as an io.ReaderAt, so that a
// Walk can analyse a profile where it is stored without downloading it:
// it keeps one stream open and serves each read that continues (or
// nearly continues) where the last one ended from it, opening another
// only when a read jumps back or far ahead. A walk reads each plane front
// to back a few times, so a profile costs a few streams per plane, not a
// request per buffer.
type RangeReaderAt struct {
	open  RangeOpener
	mu    sync.Mutex
	r     io.ReadCloser
	pos   int64 // offset of the next byte r returns
	opens int
}

// NewRangeReaderAt returns a RangeReaderAt over open; Close closes its
// stream.
func NewRangeReaderAt(open RangeOpener) *RangeReaderAt { return &RangeReaderAt{open: open} }

// ReadAt reads len(p) bytes at off, fewer only at the end of the object
// (with io.EOF).
func (ra *RangeReaderAt) ReadAt(p []byte, off int64) (int, error) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.r != nil && off >= ra.pos && off-ra.pos <= maxDiscard {
		if n, err := io.CopyN(io.Discard, ra.r, off-ra.pos); err != nil {
			ra.pos += n
			ra.drop()
		} else {
			ra.pos = off
		}
	}
	if ra.r == nil || off != ra.pos {
		ra.drop()
		r, err := ra.open(off)
		if err != nil {
			return 0, fmt.Errorf("opening at byte %d: %w", off, err)
		}
		ra.r, ra.pos = r, off
		ra.opens++
	}
	n, err := io.ReadFull(ra.r, p)
	ra.pos += int64(n)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	if err != nil {
		ra.drop()
	}
	return n, err
}

// Opens is how many streams have been opened.
func (ra *RangeReaderAt) Opens() int {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return ra.opens
}

func (ra *RangeReaderAt) drop() {
	if ra.r != nil {
		ra.r.Close()
		ra.r = nil
	}
}

// Close closes the open stream.
func (ra *RangeReaderAt) Close() error {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	ra.drop()
	return nil
}
