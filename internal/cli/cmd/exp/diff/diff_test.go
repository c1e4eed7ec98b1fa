package diff

import (
	"slices"
	"testing"

	"github.com/falconhq/falcon/internal/compare"
)

func TestCells(t *testing.T) {
	tests := []struct {
		name    string
		values  []string
		present []bool
		want    []string
	}{
		{"one line each", []string{"a", "b"}, []bool{true, true}, []string{"a", "b"}},
		{"absent and empty", []string{"", ""}, []bool{false, true}, []string{"-", `""`}},
		{"scripts differing on line 3", []string{"set -e\ncd x\nrun 1\nend", "set -e\ncd x\nrun 2\nend"}, []bool{true, true},
			[]string{"line 3: run 1", "line 3: run 2"}},
		{"one script longer", []string{"a\nb", "a\nb\nc"}, []bool{true, true}, []string{"line 3: (it ends at line 2)", "line 3: c"}},
		{"a one-line value against a script", []string{"a", "a\nb"}, []bool{true, true}, []string{"line 2: (it ends at line 1)", "line 2: b"}},
		{"a script against one absent", []string{"a\nb", ""}, []bool{true, false}, []string{"a\nb", "-"}},
		{"three, the third differing first", []string{"a\nb\nc", "a\nb\nd", "a\nx\nc"}, []bool{true, true, true},
			[]string{"line 2: b", "line 2: b", "line 2: x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cells(compare.Row{Values: tt.values, Present: tt.present})
			if !slices.Equal(got, tt.want) {
				t.Errorf("cells = %q, want %q", got, tt.want)
			}
		})
	}
}
