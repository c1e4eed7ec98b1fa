package ids

import (
	"crypto/rand"
	"fmt"
	"strings"
)

// Prefixes of each kind of ID.
const (
	Experiment = "exp-"
	Job        = "job-"
	Artifact   = "art-"
	Cluster    = "cl-"
	Analysis   = "ana-"
)

const (
	alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	length   = 10
)

// New returns prefix plus ten random characters of [a-z0-9]. 36^10 (3.6e15)
// values make a collision between two live IDs vanishingly unlikely; the
// store's unique keys catch one if it ever happens.
func New(prefix string) string {
	var b [length]byte
	// rejection sampling keeps the distribution uniform: 252 = 7*36.
	out := make([]byte, 0, length)
	for len(out) < length {
		if _, err := rand.Read(b[:]); err != nil {
			panic(fmt.Sprintf("ids: crypto/rand failed: %v", err))
		}
		for _, c := range b {
			if c < 252 && len(out) < length {
				out = append(out, alphabet[c%36])
			}
		}
	}
	return prefix + string(out)
}

// Valid reports whether id is prefix followed by ten characters of [a-z0-9].
func Valid(prefix, id string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || len(rest) != length {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if !strings.ContainsRune(alphabet, rune(rest[i])) {
			return false
		}
	}
	return true
}
