package watch

import (
	"testing"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

func TestWakes(t *testing.T) {
	analyses := []string{"analysis"}
	for _, tt := range []struct {
		kind  string
		kinds []string
		want  bool
	}{
		{"job", nil, true},
		{"analysis", nil, true},
		{"analysis", analyses, true},
		{"job", analyses, false},
		{"experiment", analyses, false},
		{"cluster", analyses, false},
		{"", analyses, true},       // a stream's hello: what it missed is unknown
		{"resync", analyses, true}, // the server says so itself
	} {
		if got := wakes(&falconv1.Change{Kind: tt.kind}, tt.kinds); got != tt.want {
			t.Errorf("wakes(%q, %v) = %v, want %v", tt.kind, tt.kinds, got, tt.want)
		}
	}
}
