package exec

import (
	"bytes"
	"sync"
	"testing"
)

func TestLinePrefixer(t *testing.T) {
	for _, tt := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"whole lines", []string{"a\nb\n"}, "r0: a\nr0: b\n"},
		{"a line in pieces", []string{"he", "llo", "\n"}, "r0: hello\n"},
		{"a last line not ended", []string{"a\nb"}, "r0: a\nr0: b\n"},
		{"empty lines", []string{"\n\n"}, "r0: \nr0: \n"},
		{"nothing", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			p := &linePrefixer{w: &out, mu: &sync.Mutex{}, prefix: "r0: "}
			for _, w := range tt.writes {
				if n, err := p.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			p.flush()
			if out.String() != tt.want {
				t.Errorf("got %q, want %q", out.String(), tt.want)
			}
		})
	}
}
