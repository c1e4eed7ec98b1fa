package cp

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The CRC is the one the far side computes, so it is checked against the
// real cksum on this machine, over lengths that end mid-word and cross
// the length bytes' boundaries.
func TestCksumMatchesPOSIXCksum(t *testing.T) {
	if _, err := exec.LookPath("cksum"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no cksum on this machine (CI=true: failing instead of skipping)")
		}
		t.Skip("no cksum on this machine")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 9, 255, 256, 65537, 1 << 20} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		cmd := exec.Command("cksum")
		cmd.Stdin = bytes.NewReader(b)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		c := newCksum()
		c.Write(b[:n/3])
		c.Write(b[n/3:])
		if got, want := fmt.Sprintf("%d %d", c.Sum32(), n), strings.TrimSpace(string(out)); got != want {
			t.Errorf("%d bytes: %s; cksum says %s", n, got, want)
		}
	}
}

func BenchmarkCksum(b *testing.B) {
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	c := newCksum()
	for b.Loop() {
		c.Write(buf)
	}
}

// cksumByTable is the CRC bit by bit from its definition: what the fast
// path must agree with on every length and split, not only the few the
// cksum binary is run on.
func cksumByTable(b []byte) uint32 {
	var crc uint32
	step := func(x byte) {
		crc ^= uint32(x) << 24
		for range 8 {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x04C11DB7
			} else {
				crc <<= 1
			}
		}
	}
	for _, x := range b {
		step(x)
	}
	for n := len(b); n > 0; n >>= 8 {
		step(byte(n))
	}
	return ^crc
}

func TestCksumMatchesItsDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 7, 8, 15, 16, 17, cksumChunk - 1, cksumChunk, cksumChunk + 9, 3*cksumChunk + 5} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		for _, cut := range []int{0, n / 2, max(n-1, 0)} {
			c := newCksum()
			c.Write(b[:cut])
			c.Write(b[cut:])
			if got, want := c.Sum32(), cksumByTable(b); got != want {
				t.Errorf("%d bytes cut at %d: %d, want %d", n, cut, got, want)
			}
		}
	}
}
