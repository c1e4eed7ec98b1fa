package cp

import (
	"encoding/binary"
	"hash"
	"hash/crc32"
	"math/bits"
)

// cksum is POSIX cksum's CRC (CRC-32 with polynomial 0x04C11DB7, most
// significant bit first, the length appended, inverted): the checksum
// every image's coreutils or busybox can compute on the far side, and
// GNU's does at gigabytes a second. It is the IEEE CRC taken the other
// way round: hash/crc32 computes that polynomial least significant bit
// first, with the carry-less multiply of the CPU where it has one, and
// the CRC of the bytes with their bits reversed, reversed, is this one.
// Reversing eight bytes' bits costs a dozen instructions, so this runs at
// twice what a table of eight bytes at a time did (BenchmarkCksum: 3.2
// against 1.7 GB/s), on the CLI's side of every exp cp.
type cksum struct {
	crc uint32 // most significant bit first, not inverted
	n   uint64
	buf []byte // the input with each byte's bits reversed
}

var _ hash.Hash32 = (*cksum)(nil)

func newCksum() *cksum { return &cksum{} }

func (c *cksum) Write(p []byte) (int, error) {
	c.n += uint64(len(p))
	if c.buf == nil {
		c.buf = make([]byte, cksumChunk)
	}
	c.crc = cksumUpdate(c.crc, p, c.buf)
	return len(p), nil
}

// cksumChunk is how much input is reversed at a time: small enough to
// stay in the cache between its reversal and its CRC.
const cksumChunk = 16 << 10

// cksumUpdate is crc after p, buf being scratch space.
func cksumUpdate(crc uint32, p, buf []byte) uint32 {
	// The reflected CRC's register is this one's, bit for bit reversed;
	// crc32.Update inverts the register before and after.
	r := bits.Reverse32(crc)
	for len(p) > 0 {
		n := min(len(p), len(buf))
		reflectBytes(buf[:n], p[:n])
		r = ^crc32.Update(^r, crc32.IEEETable, buf[:n])
		p = p[n:]
	}
	return bits.Reverse32(r)
}

// reflectBytes writes src to dst with the bits of each byte reversed.
func reflectBytes(dst, src []byte) {
	const (
		m1 = 0x5555555555555555
		m2 = 0x3333333333333333
		m4 = 0x0f0f0f0f0f0f0f0f
	)
	i := 0
	for ; i+8 <= len(src); i += 8 {
		x := binary.LittleEndian.Uint64(src[i:])
		x = x>>1&m1 | x&m1<<1
		x = x>>2&m2 | x&m2<<2
		x = x>>4&m4 | x&m4<<4
		binary.LittleEndian.PutUint64(dst[i:], x)
	}
	for ; i < len(src); i++ {
		dst[i] = bits.Reverse8(src[i])
	}
}

// Sum32 is what cksum prints for the bytes written.
func (c *cksum) Sum32() uint32 {
	var lb []byte
	for n := c.n; n > 0; n >>= 8 {
		lb = append(lb, byte(n))
	}
	var buf [8]byte
	return ^cksumUpdate(c.crc, lb, buf[:])
}

func (c *cksum) Sum(b []byte) []byte { return binary.BigEndian.AppendUint32(b, c.Sum32()) }
func (c *cksum) Reset()              { c.crc, c.n = 0, 0 }
func (c *cksum) Size() int           { return 4 }
func (c *cksum) BlockSize() int      { return 8 }
