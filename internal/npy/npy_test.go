package npy

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"strings"
	"testing"
)

func TestHalf(t *testing.T) {
	for bits, want := range map[uint16]float32{
		0x3c00: 1, 0xc000: -2, 0x7bff: 65504, 0x0001: 5.9604645e-08, 0x0000: 0, 0x3555: 0.33325195,
	} {
		if got := halfToFloat32(bits); got != want {
			t.Errorf("half %#04x = %v, want %v", bits, got, want)
		}
	}
	if !math.IsInf(float64(halfToFloat32(0x7c00)), 1) || !math.IsNaN(float64(halfToFloat32(0x7e00))) {
		t.Error("half inf/nan")
	}
}

func TestRoundTrip(t *testing.T) {
	for _, dt := range []string{"float32", "float64", "bfloat16"} {
		var b bytes.Buffer
		vals := []float64{1, -2.5, 0.15625, 3}
		if err := Write(&b, dt, []int{2, 2}, vals); err != nil {
			t.Fatal(err)
		}
		if b.Len()%64 != 0 && (b.Len()-8*len(vals))%16 != 0 {
			t.Logf("size %d", b.Len())
		}
		r, err := Open("x.npy", &b)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		if r.Header.DType != dt || len(r.Header.Shape) != 2 || r.Header.Len() != 4 {
			t.Fatalf("%s: header %+v", dt, r.Header)
		}
		for i, want := range vals {
			got, err := r.Next()
			if err != nil || got != want {
				t.Fatalf("%s element %d = %v, %v; want %v", dt, i, got, err, want)
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("%s: after the last element: %v", dt, err)
		}
	}
}

// A float16 file as numpy writes it (version 1, header padded to 64).
func TestFloat16File(t *testing.T) {
	hdr := "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }"
	hdr += strings.Repeat(" ", 64-(10+len(hdr)+1)%64) + "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	b.WriteString(hdr)
	binary.Write(&b, binary.LittleEndian, []uint16{0x3c00, 0xc000, 0x3800})
	r, err := Open("h.npy", &b)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []float64{1, -2, 0.5} {
		if got, err := r.Next(); err != nil || got != want {
			t.Fatalf("got %v, %v; want %v", got, err, want)
		}
	}
}

func TestRefused(t *testing.T) {
	var ok bytes.Buffer
	if err := Write(&ok, "float32", []int{4}, []float64{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	full := ok.Bytes()
	intHdr := bytes.Replace(full, []byte("<f4"), []byte("<i4"), 1)
	for _, tt := range []struct {
		name string
		data []byte
		want string
	}{
		{"not npy", []byte("hello world, not numpy"), "no \\x93NUMPY magic"},
		{"empty", nil, "not a .npy file"},
		{"integers", intHdr, `dtype "<i4" is not a float array`},
		{"truncated header", full[:20], "truncated header"},
	} {
		_, err := Open("bad.npy", bytes.NewReader(tt.data))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "bad.npy: ") {
			t.Errorf("%s: %v; want an error naming the file and %q", tt.name, err, tt.want)
		}
	}
	// A file that ends early fails at the missing element.
	r, err := Open("short.npy", bytes.NewReader(full[:len(full)-6]))
	if err != nil {
		t.Fatal(err)
	}
	var last error
	for range 4 {
		if _, last = r.Next(); last != nil {
			break
		}
	}
	if last == nil || !strings.Contains(last.Error(), "truncated") {
		t.Errorf("short file: %v", last)
	}
}
