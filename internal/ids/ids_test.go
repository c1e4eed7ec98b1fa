package ids

import "testing"

func TestNewIsValid(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range []string{Experiment, Job, Artifact, Cluster} {
		for i := 0; i < 1000; i++ {
			id := New(p)
			if !Valid(p, id) {
				t.Fatalf("New(%q) = %q, not valid", p, id)
			}
			if seen[id] {
				t.Fatalf("duplicate id %q", id)
			}
			seen[id] = true
		}
	}
}

func TestValid(t *testing.T) {
	tests := []struct {
		name, prefix, id string
		want             bool
	}{
		{"good", Experiment, "exp-q7odgo8q9x", true},
		{"wrong prefix", Job, "exp-q7odgo8q9x", false},
		{"too short", Experiment, "exp-q7odgo8q9", false},
		{"too long", Experiment, "exp-q7odgo8q9xx", false},
		{"upper case", Experiment, "exp-Q7odgo8q9x", false},
		{"punctuation", Experiment, "exp-q7odgo8q-x", false},
		{"empty", Experiment, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Valid(tt.prefix, tt.id); got != tt.want {
				t.Errorf("Valid(%q, %q) = %v, want %v", tt.prefix, tt.id, got, tt.want)
			}
		})
	}
}
