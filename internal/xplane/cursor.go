package xplane

import (
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// bufSize is how much of the file the cursor holds at once.
const bufSize = 1 << 20

// maxVarint is the longest varint encoding.
const maxVarint = 10

// cursor reads a file front to back through one buffer, and jumps
// (seeks) over what it does not need. Every read is bounded by the end
// offset of the message it belongs to, so a length that points past its
// parent is found where it is read.
type cursor struct {
	name         string
	decompressed bool
	ra           io.ReaderAt
	size         int64
	buf          []byte
	base         int64 // file offset of buf[0]
	r, w         int   // buf[r:w] is what has been read from the file and not consumed
	read         int64 // bytes read from ra
}

func newCursor(name string, ra io.ReaderAt, size int64, decompressed bool) *cursor {
	return &cursor{name: name, decompressed: decompressed, ra: ra, size: size, buf: make([]byte, bufSize)}
}

func (c *cursor) off() int64 { return c.base + int64(c.r) }

// seek moves to off, keeping the buffer when off is inside it.
func (c *cursor) seek(off int64) {
	if off >= c.base && off <= c.base+int64(c.w) {
		c.r = int(off - c.base)
		return
	}
	c.base, c.r, c.w = off, 0, 0
}

// fill makes n bytes available after r unless the file ends first
// (n <= len(buf)). Only an I/O error is an error.
func (c *cursor) fill(n int) error {
	if c.w-c.r >= n {
		return nil
	}
	if c.r > 0 {
		copy(c.buf, c.buf[c.r:c.w])
		c.base += int64(c.r)
		c.w -= c.r
		c.r = 0
	}
	for c.w < n {
		at := c.base + int64(c.w)
		if at >= c.size {
			return nil
		}
		want := int(min(int64(len(c.buf)-c.w), c.size-at))
		m, err := c.ra.ReadAt(c.buf[c.w:c.w+want], at)
		c.w += m
		c.read += int64(m)
		if m < want {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the file shrank while being read
			}
			return fmt.Errorf("%s: reading at byte %d: %w", c.name, at+int64(m), err)
		}
	}
	return nil
}

// corrupt returns a *CorruptError at off.
func (c *cursor) corrupt(off int64, format string, args ...any) error {
	return &CorruptError{File: c.name, Offset: off, Decompressed: c.decompressed, Detail: fmt.Sprintf(format, args...)}
}

// past describes end for a message that would run past it.
func (c *cursor) past(end int64, msg string) string {
	if end >= c.size {
		return fmt.Sprintf("the file ends at byte %d (truncated?)", c.size)
	}
	return fmt.Sprintf("its %s ends at byte %d", msg, end)
}

// varint reads a varint that must end by end.
func (c *cursor) varint(end int64, msg string) (uint64, error) {
	if c.r < c.w && c.buf[c.r] < 0x80 && c.off() < end { // one byte: most tags and small values
		v := uint64(c.buf[c.r])
		c.r++
		return v, nil
	}
	if err := c.fill(maxVarint); err != nil {
		return 0, err
	}
	at := c.off()
	b := c.buf[c.r:c.w]
	if lim := end - at; int64(len(b)) > lim {
		b = b[:max(lim, 0)]
	}
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		if len(b) < maxVarint && protowire.ParseError(n) == io.ErrUnexpectedEOF {
			return 0, c.corrupt(at, "a varint of the %s runs past the end: %s", msg, c.past(end, msg))
		}
		return 0, c.corrupt(at, "bad varint in the %s: %v", msg, protowire.ParseError(n))
	}
	c.r += n
	return v, nil
}

// fixed64 reads 8 little-endian bytes that must end by end.
func (c *cursor) fixed64(end int64, msg string) (uint64, error) {
	at := c.off()
	if end-at < 8 {
		return 0, c.corrupt(at, "a fixed64 of the %s runs past the end: %s", msg, c.past(end, msg))
	}
	if err := c.fill(8); err != nil {
		return 0, err
	}
	if c.w-c.r < 8 {
		return 0, c.corrupt(at, "a fixed64 of the %s runs past the end: %s", msg, c.past(c.size, msg))
	}
	v, _ := protowire.ConsumeFixed64(c.buf[c.r:c.w])
	c.r += 8
	return v, nil
}

// tag reads a field's number and wire type. Groups (wire types 3 and 4)
// are refused: XSpace has none, and a corrupted byte often looks like one.
func (c *cursor) tag(end int64, msg string) (protowire.Number, protowire.Type, error) {
	at := c.off()
	v, err := c.varint(end, msg)
	if err != nil {
		return 0, 0, err
	}
	if v>>3 > uint64(protowire.MaxValidNumber) {
		return 0, 0, c.corrupt(at, "field number %d in the %s is out of range", v>>3, msg)
	}
	num, typ := protowire.Number(v>>3), protowire.Type(v&7)
	switch {
	case num < protowire.MinValidNumber:
		return 0, 0, c.corrupt(at, "field number 0 in the %s", msg)
	case typ == protowire.StartGroupType || typ == protowire.EndGroupType || typ > protowire.Fixed32Type:
		return 0, 0, c.corrupt(at, "field %d of the %s has wire type %d, which XSpace never uses", num, msg, typ)
	}
	return num, typ, nil
}

// length reads the length of a length-delimited field and returns where its
// bytes end; they must end by end.
func (c *cursor) length(end int64, msg, field string) (int64, error) {
	at := c.off()
	n, err := c.varint(end, msg)
	if err != nil {
		return 0, err
	}
	start := c.off()
	if n > uint64(end-start) {
		return 0, c.corrupt(at, "%s.%s is %d bytes, but %s", msg, field, n, c.past(end, msg))
	}
	return start + int64(n), nil
}

// skip steps over the value of a field of type typ.
func (c *cursor) skip(end int64, typ protowire.Type, msg string) error {
	switch typ {
	case protowire.VarintType:
		_, err := c.varint(end, msg)
		return err
	case protowire.Fixed64Type, protowire.Fixed32Type:
		n := int64(8)
		if typ == protowire.Fixed32Type {
			n = 4
		}
		if at := c.off(); end-at < n {
			return c.corrupt(at, "a fixed-size field of the %s runs past the end: %s", msg, c.past(end, msg))
		}
		c.seek(c.off() + n)
		return nil
	default: // BytesType; tag refused the others
		e, err := c.length(end, msg, "(unknown field)")
		if err != nil {
			return err
		}
		c.seek(e)
		return nil
	}
}

// want checks a known field's wire type: a mismatch is corruption, not an
// unknown field, since XProf's writers never produce one.
func (c *cursor) want(at int64, got, want protowire.Type, msg, field string) error {
	if got != want {
		return c.corrupt(at, "%s.%s has wire type %d, want %d", msg, field, got, want)
	}
	return nil
}

// str reads a string field's bytes, up to maxStr of them; longer strings
// are stepped over and returned empty with their length.
func (c *cursor) str(end int64, msg, field string, maxStr int) (string, int, error) {
	e, err := c.length(end, msg, field)
	if err != nil {
		return "", 0, err
	}
	at := c.off()
	n := int(e - at)
	if n > maxStr {
		c.seek(e)
		return "", n, nil
	}
	var s string
	if n <= len(c.buf) {
		if err := c.fill(n); err != nil {
			return "", 0, err
		}
		if c.w-c.r < n {
			return "", 0, c.corrupt(at, "%s.%s runs past the end: %s", msg, field, c.past(c.size, msg))
		}
		s = string(c.buf[c.r : c.r+n])
		c.r += n
	} else {
		b := make([]byte, n)
		if _, err := c.ra.ReadAt(b, c.off()); err != nil {
			return "", 0, fmt.Errorf("%s: reading at byte %d: %w", c.name, c.off(), err)
		}
		c.read += int64(n)
		c.seek(e)
		s = string(b)
	}
	if !utf8.ValidString(s) {
		return "", 0, c.corrupt(at, "%s.%s is not UTF-8", msg, field)
	}
	return s, n, nil
}

func float64bits(v uint64) float64 { return math.Float64frombits(v) }
