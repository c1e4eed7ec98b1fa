package execwire_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/execwire"
)

var (
	stdin  = execwire.Stdin
	stderr = execwire.Stderr
	output = execwire.Output
)

// The numbers are the protocol's, which its clients already speak.
func TestFieldNumbers(t *testing.T) {
	if execwire.Stdin != 2 || execwire.Stdout != 1 || execwire.Stderr != 2 {
		t.Errorf("stdin %d, stdout %d, stderr %d; want 2, 1, 2 (falcon.proto)", execwire.Stdin, execwire.Stdout, execwire.Stderr)
	}
}

// What Header and the bytes make is what proto.Marshal makes, and the
// runtime reads it back: the wire does not change.
func TestHeaderIsTheMarshalledForm(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 1 << 20} {
		data := bytes.Repeat([]byte{'x'}, n)
		want, err := proto.Marshal(&falconv1.ExecRequest{Msg: &falconv1.ExecRequest_Stdin{Stdin: data}})
		if err != nil {
			t.Fatal(err)
		}
		got := append(execwire.Header(nil, stdin, n), data...)
		if !bytes.Equal(got, want) {
			t.Errorf("%d bytes: header %x, proto.Marshal %x", n, got[:min(len(got), 8)], want[:min(len(want), 8)])
		}
		num, v, ok := execwire.Bytes(got)
		if !ok || num != stdin || !bytes.Equal(v, data) {
			t.Errorf("%d bytes: Bytes = %d, %d bytes, %v", n, num, len(v), ok)
		}
	}
}

// closer is one message's writer: what Write wrote, and whether it was
// closed.
type closer struct {
	bytes.Buffer
	closed bool
}

func (c *closer) Close() error { c.closed = true; return nil }

func TestWriteIsTheMarshalledForm(t *testing.T) {
	var scratch []byte
	for _, n := range []int{0, 300, 1 << 16} {
		data := bytes.Repeat([]byte{'z'}, n)
		want, _ := proto.Marshal(&falconv1.ExecResponse{Msg: &falconv1.ExecResponse_Stderr{Stderr: data}})
		var w closer
		var err error
		if scratch, err = execwire.Write(&w, scratch, stderr, data); err != nil || !w.closed || !bytes.Equal(w.Bytes(), want) {
			t.Errorf("%d bytes: err %v, closed %v, wrote %d bytes equal to proto.Marshal's: %v", n, err, w.closed, w.Len(), bytes.Equal(w.Bytes(), want))
		}
	}
}

func TestBytesRefusesOtherMessages(t *testing.T) {
	closeStdin, _ := proto.Marshal(&falconv1.ExecRequest{Msg: &falconv1.ExecRequest_CloseStdin{CloseStdin: true}})
	start, _ := proto.Marshal(&falconv1.ExecRequest{Msg: &falconv1.ExecRequest_Start{Start: &falconv1.ExecStart{ExpId: "exp-1"}}})
	two := append(execwire.Header(nil, stdin, 1), 'a')
	two = append(two, closeStdin...)
	for name, msg := range map[string][]byte{
		"empty":                 nil,
		"a varint field":        closeStdin,
		"a value cut short":     execwire.Header(nil, stdin, 5),
		"bytes after the value": two,
	} {
		if num, _, ok := execwire.Bytes(msg); ok {
			t.Errorf("%s: Bytes says field %d", name, num)
		}
	}
	// An embedded message is length-delimited too: the field's number
	// tells it apart, which is the caller's to check.
	if num, _, ok := execwire.Bytes(start); !ok || num == stdin {
		t.Errorf("start: Bytes = %d %v; want field 1, not stdin", num, ok)
	}
}

func TestReadHeader(t *testing.T) {
	data := bytes.Repeat([]byte{'y'}, 300)
	out, _ := proto.Marshal(&falconv1.ExecResponse{Msg: &falconv1.ExecResponse_Stderr{Stderr: data}})
	r := bytes.NewReader(out)
	num, n, _, ok, err := execwire.ReadHeader(r, output)
	if err != nil || !ok || num != stderr || n != 300 {
		t.Fatalf("ReadHeader = %d %d %v %v", num, n, ok, err)
	}
	if rest, _ := io.ReadAll(r); !bytes.Equal(rest, data) {
		t.Errorf("left %d bytes after the header, want the 300 of the value", len(rest))
	}

	// Another message: what was read comes back, to be read with the rest.
	notice, _ := proto.Marshal(&falconv1.ExecResponse{Msg: &falconv1.ExecResponse_Notice{Notice: "waiting"}})
	r = bytes.NewReader(notice)
	_, _, head, ok, err := execwire.ReadHeader(r, output)
	if err != nil || ok {
		t.Fatalf("notice: ok %v err %v", ok, err)
	}
	rest, _ := io.ReadAll(r)
	var got falconv1.ExecResponse
	if err := proto.Unmarshal(append(head, rest...), &got); err != nil || got.GetNotice() != "waiting" {
		t.Errorf("notice read back as %v (%v)", &got, err)
	}

	if _, _, head, ok, err := execwire.ReadHeader(bytes.NewReader(nil), output); err != nil || ok || len(head) != 0 {
		t.Errorf("an empty message: head %x ok %v err %v; want nothing read, not ours", head, ok, err)
	}
	for name, in := range map[string][]byte{
		"a tag alone":        out[:1],
		"a length cut short": {out[0], 0x80},
	} {
		_, _, _, _, err := execwire.ReadHeader(bytes.NewReader(in), output)
		if err == nil || !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: err %v; want EOF", name, err)
		}
	}
	if _, _, _, _, err := execwire.ReadHeader(strings.NewReader("\x0a"+strings.Repeat("\xff", 11)), output); err == nil {
		t.Error("a length of eleven bytes: no error")
	}
}
