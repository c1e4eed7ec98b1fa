package execwire

import (
	"encoding/binary"
	"errors"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// MaxHeader is the longest header ReadHeader reads: a tag of one byte
// (fields 1 to 15) and a length of up to ten.
const MaxHeader = 1 + binary.MaxVarintLen64

// The fields whose messages are bytes alone.
var (
	Stdin  = field((*falconv1.ExecRequest)(nil), "stdin")
	Stdout = field((*falconv1.ExecResponse)(nil), "stdout")
	Stderr = field((*falconv1.ExecResponse)(nil), "stderr")
)

// Output reports whether num is an ExecResponse field of output.
func Output(num protowire.Number) bool { return num == Stdout || num == Stderr }

// field is the number of m's field name; it panics when m has none, which
// only a mistyped name here can cause.
func field(m proto.Message, name protoreflect.Name) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if f == nil {
		panic("execwire: " + string(m.ProtoReflect().Descriptor().FullName()) + " has no field " + string(name))
	}
	return f.Number()
}

// Header appends the header of a message whose only field is the bytes
// field num holding n bytes: what precedes the n bytes on the wire.
func Header(dst []byte, num protowire.Number, n int) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(n))
}

// Write writes a message of field num holding p to w, one message's
// writer (a WebSocket's NextWriter): its header, built in scratch, then p
// itself, then Close. It returns scratch for the next call.
func Write(w io.WriteCloser, scratch []byte, num protowire.Number, p []byte) ([]byte, error) {
	scratch = Header(scratch[:0], num, len(p))
	_, err := w.Write(scratch)
	if err == nil {
		_, err = w.Write(p)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return scratch, err
}

// Bytes returns the field and its value when msg is exactly one bytes
// field; the value aliases msg. ok is false for any other message, which
// the caller unmarshals as usual.
func Bytes(msg []byte) (num protowire.Number, v []byte, ok bool) {
	num, typ, n := protowire.ConsumeTag(msg)
	if n < 0 || typ != protowire.BytesType {
		return 0, nil, false
	}
	v, m := protowire.ConsumeBytes(msg[n:])
	if m < 0 || n+m != len(msg) {
		return 0, nil, false
	}
	return num, v, true
}

// ErrTrailing is a message that went on after its one field's bytes.
var ErrTrailing = errors.New("execwire: bytes after the field's value")

// ReadHeader reads a message's header from r, one byte at a time, when
// the message starts with a bytes field whose number want accepts: then
// it returns the field, the value's length and ok, and r is left at the
// value's first byte. Otherwise ok is false and head holds what was read,
// the start of a message the caller reads whole and unmarshals.
func ReadHeader(r io.Reader, want func(protowire.Number) bool) (num protowire.Number, n int64, head []byte, ok bool, err error) {
	var b [MaxHeader]byte
	if _, err := io.ReadFull(r, b[:1]); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, 0, nil, false, nil // an empty message, not ours
		}
		return 0, 0, nil, false, err
	}
	num, typ, tn := protowire.ConsumeTag(b[:1])
	if tn < 0 || typ != protowire.BytesType || !want(num) {
		// A tag of more than one byte, or another field: not ours.
		return 0, 0, b[:1:1], false, nil
	}
	for i := 1; i < len(b); i++ {
		if _, err := io.ReadFull(r, b[i:i+1]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, 0, nil, false, err
		}
		if b[i] < 0x80 {
			v, vn := protowire.ConsumeVarint(b[1 : i+1])
			if vn < 0 || v > 1<<62 {
				return 0, 0, nil, false, errors.New("execwire: a length out of range")
			}
			return num, int64(v), nil, true, nil
		}
	}
	return 0, 0, nil, false, errors.New("execwire: a length of more than ten bytes")
}
