package cp

import (
	"encoding/binary"
	"hash"
)

// cksum is POSIX cksum's CRC (CRC-32 with polynomial 0x04C11DB7, most
// significant bit first, the length appended, inverted): the checksum
// every image's coreutils or busybox can compute on the far side, and
// GNU's does at gigabytes a second. hash/crc32 only has the reflected
// form, so it is computed here, eight bytes at a time.
type cksum struct {
	crc uint32
	n   uint64
}

var _ hash.Hash32 = (*cksum)(nil)

var cksumTable = func() (t [8][256]uint32) {
	for i := range 256 {
		c := uint32(i) << 24
		for range 8 {
			if c&0x80000000 != 0 {
				c = c<<1 ^ 0x04C11DB7
			} else {
				c <<= 1
			}
		}
		t[0][i] = c
	}
	for k := 1; k < 8; k++ {
		for i := range 256 {
			p := t[k-1][i]
			t[k][i] = p<<8 ^ t[0][p>>24]
		}
	}
	return t
}()

func newCksum() *cksum { return &cksum{} }

func (c *cksum) Write(p []byte) (int, error) {
	c.n += uint64(len(p))
	c.crc = cksumUpdate(c.crc, p)
	return len(p), nil
}

func cksumUpdate(crc uint32, p []byte) uint32 {
	t := &cksumTable
	for len(p) >= 8 {
		crc ^= binary.BigEndian.Uint32(p)
		crc = t[7][crc>>24] ^ t[6][crc>>16&0xff] ^ t[5][crc>>8&0xff] ^ t[4][crc&0xff] ^
			t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]]
		p = p[8:]
	}
	for _, b := range p {
		crc = crc<<8 ^ t[0][byte(crc>>24)^b]
	}
	return crc
}

// Sum32 is what cksum prints for the bytes written.
func (c *cksum) Sum32() uint32 {
	crc := c.crc
	var lb []byte
	for n := c.n; n > 0; n >>= 8 {
		lb = append(lb, byte(n))
	}
	return ^cksumUpdate(crc, lb)
}

func (c *cksum) Sum(b []byte) []byte { return binary.BigEndian.AppendUint32(b, c.Sum32()) }
func (c *cksum) Reset()              { c.crc, c.n = 0, 0 }
func (c *cksum) Size() int           { return 4 }
func (c *cksum) BlockSize() int      { return 8 }
