package iostreams

import (
	"os"
	"path/filepath"
	"testing"
)

func TestConfirm(t *testing.T) {
	tests := []struct {
		input string
		want  bool
	}{
		{"y\n", true},
		{"YES\n", true},
		{" yes \n", true},
		{"n\n", false},
		{"\n", false},
		{"", false},
		{"sure\n", false},
	}
	for _, tt := range tests {
		ios, in, _, errOut := Test()
		in.WriteString(tt.input)
		got, err := ios.Confirm("Abort exp-1?")
		if err != nil {
			t.Fatalf("Confirm(%q): %v", tt.input, err)
		}
		if got != tt.want {
			t.Errorf("Confirm(%q) = %v, want %v", tt.input, got, tt.want)
		}
		if errOut.String()[:len("Abort exp-1? [y/N] ")] != "Abort exp-1? [y/N] " {
			t.Errorf("prompt = %q", errOut.String())
		}
	}
}

func TestReadInput(t *testing.T) {
	ios, in, _, _ := Test()
	in.WriteString("from stdin")
	got, err := ios.ReadInput("-")
	if err != nil || string(got) != "from stdin" {
		t.Errorf(`ReadInput("-") = %q, %v`, got, err)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("from file"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = ios.ReadInput(path)
	if err != nil || string(got) != "from file" {
		t.Errorf("ReadInput(file) = %q, %v", got, err)
	}
}
