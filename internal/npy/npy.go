package npy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Header is what a .npy file says about its array.
type Header struct {
	DType string // "float16", "float32", "float64" or "bfloat16"
	Shape []int
	// FortranOrder arrays are refused by Open: their element order is not
	// the one indices are reported in.
	FortranOrder bool
	order        binary.ByteOrder
	size         int // bytes per element
}

// Len is the number of elements.
func (h Header) Len() int {
	n := 1
	for _, d := range h.Shape {
		n *= d
	}
	return n
}

// Reader streams an array's elements.
type Reader struct {
	Header Header
	r      *bufio.Reader
	left   int
	buf    [8]byte
}

var magic = []byte("\x93NUMPY")

// Open reads the header of a .npy stream. name is for errors.
func Open(name string, r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	pre := make([]byte, 8)
	if _, err := io.ReadFull(br, pre); err != nil {
		return nil, fmt.Errorf("%s: not a .npy file: %w", name, err)
	}
	if string(pre[:6]) != string(magic) {
		return nil, fmt.Errorf("%s: not a .npy file (no \\x93NUMPY magic)", name)
	}
	var hlen int
	switch pre[6] {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return nil, fmt.Errorf("%s: truncated header", name)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return nil, fmt.Errorf("%s: truncated header", name)
		}
		hlen = int(binary.LittleEndian.Uint32(b[:]))
	default:
		return nil, fmt.Errorf("%s: .npy format version %d.%d is not supported", name, pre[6], pre[7])
	}
	if hlen > 1<<20 {
		return nil, fmt.Errorf("%s: header of %d bytes is not a .npy header", name, hlen)
	}
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(br, hb); err != nil {
		return nil, fmt.Errorf("%s: truncated header", name)
	}
	h, err := parseHeader(string(hb))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if h.FortranOrder && len(h.Shape) > 1 {
		return nil, fmt.Errorf("%s: Fortran-ordered arrays are not supported; save with np.ascontiguousarray", name)
	}
	return &Reader{Header: h, r: br, left: h.Len()}, nil
}

var (
	descrRe   = regexp.MustCompile(`'descr'\s*:\s*'([^']*)'`)
	fortranRe = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	shapeRe   = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

func parseHeader(s string) (Header, error) {
	var h Header
	d := descrRe.FindStringSubmatch(s)
	sh := shapeRe.FindStringSubmatch(s)
	if d == nil || sh == nil {
		return h, errors.New("header has no descr or shape")
	}
	if f := fortranRe.FindStringSubmatch(s); f != nil {
		h.FortranOrder = f[1] == "True"
	}
	switch d[1] {
	case "<f2", "|f2", "f2":
		h.DType, h.size, h.order = "float16", 2, binary.LittleEndian
	case ">f2":
		h.DType, h.size, h.order = "float16", 2, binary.BigEndian
	case "<f4", "f4":
		h.DType, h.size, h.order = "float32", 4, binary.LittleEndian
	case ">f4":
		h.DType, h.size, h.order = "float32", 4, binary.BigEndian
	case "<f8", "f8":
		h.DType, h.size, h.order = "float64", 8, binary.LittleEndian
	case ">f8":
		h.DType, h.size, h.order = "float64", 8, binary.BigEndian
	case "bfloat16", "<V2", "|V2", "V2":
		h.DType, h.size, h.order = "bfloat16", 2, binary.LittleEndian
	default:
		return h, fmt.Errorf("dtype %q is not a float array; allowed: float16, float32, float64, bfloat16", d[1])
	}
	for _, part := range strings.Split(sh[1], ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return h, fmt.Errorf("shape (%s) is not a list of sizes", sh[1])
		}
		h.Shape = append(h.Shape, n)
	}
	return h, nil
}

// Next returns the next element, io.EOF after the last, and an error for
// a file that ends early.
func (r *Reader) Next() (float64, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	b := r.buf[:r.Header.size]
	if _, err := io.ReadFull(r.r, b); err != nil {
		return 0, fmt.Errorf("truncated: %d of %d elements missing", r.left, r.Header.Len())
	}
	r.left--
	o := r.Header.order
	switch r.Header.DType {
	case "float16":
		return float64(halfToFloat32(o.Uint16(b))), nil
	case "bfloat16":
		return float64(math.Float32frombits(uint32(o.Uint16(b)) << 16)), nil
	case "float32":
		return float64(math.Float32frombits(o.Uint32(b))), nil
	default:
		return math.Float64frombits(o.Uint64(b)), nil
	}
}

// halfToFloat32 converts IEEE 754 binary16.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		for frac&0x400 == 0 {
			frac <<= 1
			exp--
		}
		exp++
		frac &= 0x3ff
		return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

// Write writes values as a .npy file of dtype "float32", "float64" or
// "bfloat16" (as "<V2", like np.save; values are truncated to bfloat16,
// not rounded), for tests and tools.
func Write(w io.Writer, dtype string, shape []int, values []float64) error {
	descr := map[string]string{"float32": "<f4", "float64": "<f8", "bfloat16": "<V2"}[dtype]
	if descr == "" {
		return fmt.Errorf("cannot write dtype %q", dtype)
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	sh := strings.Join(dims, ", ")
	if len(shape) == 1 {
		sh += ","
	}
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, sh)
	pad := 64 - (10+len(hdr)+1)%64
	hdr += strings.Repeat(" ", pad%64) + "\n"
	bw := bufio.NewWriter(w)
	bw.Write(magic)
	bw.Write([]byte{1, 0})
	binary.Write(bw, binary.LittleEndian, uint16(len(hdr)))
	bw.WriteString(hdr)
	for _, v := range values {
		switch dtype {
		case "float32":
			binary.Write(bw, binary.LittleEndian, math.Float32bits(float32(v)))
		case "float64":
			binary.Write(bw, binary.LittleEndian, math.Float64bits(v))
		case "bfloat16":
			binary.Write(bw, binary.LittleEndian, uint16(math.Float32bits(float32(v))>>16))
		}
	}
	return bw.Flush()
}
