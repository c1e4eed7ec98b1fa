package runmetrics

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/errdefs"
)

func TestCompile(t *testing.T) {
	const ok = `step_time: (?P<value>[0-9.]+)`
	tests := []struct {
		name  string
		specs []Spec
		// want maps each field expected in the error to a substring of its
		// detail; nil means Compile must succeed.
		want map[string]string
	}{
		{name: "no specs", specs: nil},
		{name: "valid with step group and better", specs: []Spec{
			{Name: "step_time", Pattern: ok, Better: BetterLower},
			{Name: "train/loss.v2-x", Pattern: `step=(?P<step>\d+) loss=(?P<value>\S+)`, Better: BetterHigher},
			{Name: "_tflops", Pattern: `tflops (?P<value>\S+)`},
		}},
		{name: "missing name", specs: []Spec{{Pattern: ok}},
			want: map[string]string{"metrics[0].name": "is required"}},
		{name: "name with a space", specs: []Spec{{Name: "step time", Pattern: ok}},
			want: map[string]string{"metrics[0].name": "letters, digits and _ . / -"}},
		{name: "name starting with a digit", specs: []Spec{{Name: "1loss", Pattern: ok}},
			want: map[string]string{"metrics[0].name": "starting with a letter or _"}},
		{name: "name too long", specs: []Spec{{Name: strings.Repeat("a", MaxNameLen+1), Pattern: ok}},
			want: map[string]string{"metrics[0].name": "1-128 characters"}},
		{name: "name step is reserved", specs: []Spec{{Name: "step", Pattern: ok}},
			want: map[string]string{"metrics[0].name": "reserved"}},
		{name: "duplicate name names the first", specs: []Spec{{Name: "a", Pattern: ok}, {Name: "b", Pattern: ok}, {Name: "a", Pattern: ok}},
			want: map[string]string{"metrics[2].name": "already declared by metrics[0]"}},
		{name: "missing pattern", specs: []Spec{{Name: "a"}},
			want: map[string]string{"metrics[0].pattern": "is required"}},
		{name: "pattern does not compile", specs: []Spec{{Name: "a", Pattern: `loss: (?P<value>[0-9.]+`}},
			want: map[string]string{"metrics[0].pattern": "does not compile as RE2"}},
		{name: "pattern uses lookahead, not RE2", specs: []Spec{{Name: "a", Pattern: `loss(?=:) (?P<value>\d+)`}},
			want: map[string]string{"metrics[0].pattern": "does not compile as RE2"}},
		{name: "pattern without value group", specs: []Spec{{Name: "a", Pattern: `loss: ([0-9.]+)`}},
			want: map[string]string{"metrics[0].pattern": `no group named "value"`}},
		{name: "pattern matching an empty line", specs: []Spec{{Name: "a", Pattern: `(?P<value>[0-9]*)`}},
			want: map[string]string{"metrics[0].pattern": "matches an empty line"}},
		{name: "pattern too long", specs: []Spec{{Name: "a", Pattern: "x(?P<value>1)" + strings.Repeat("y", MaxPatternBytes)}},
			want: map[string]string{"metrics[0].pattern": "the limit is 1024"}},
		{name: "bad better", specs: []Spec{{Name: "a", Pattern: ok, Better: "Lower"}},
			want: map[string]string{"metrics[0].better": `use "lower", "higher" or leave it empty`}},
		{name: "too many specs", specs: make([]Spec, MaxSpecs+1),
			want: map[string]string{"metrics": "at most 64"}},
		{name: "every error of every spec", specs: []Spec{
			{Name: "ok", Pattern: ok},
			{Name: "bad name", Pattern: "(", Better: "up"},
			{Name: "ok", Pattern: `x ([0-9]+)`},
		}, want: map[string]string{
			"metrics[1].name":    "letters, digits",
			"metrics[1].pattern": "does not compile",
			"metrics[1].better":  `"up" is not allowed`,
			"metrics[2].name":    "already declared by metrics[0]",
			"metrics[2].pattern": "no group named",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Compile(tt.specs)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				if diff := cmp.Diff(len(tt.specs), len(p.Specs())); diff != "" {
					t.Errorf("specs kept (-want +got):\n%s", diff)
				}
				return
			}
			if p != nil || err == nil {
				t.Fatalf("Compile = %v, %v; want an error", p, err)
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("error %v is not errdefs.ErrInvalid (InvalidArgument)", err)
			}
			var fes errdefs.FieldErrors
			if !errors.As(err, &fes) {
				t.Fatalf("error %T is not errdefs.FieldErrors", err)
			}
			got := map[string]string{}
			for _, fe := range fes {
				if _, dup := got[fe.Field]; dup {
					t.Errorf("field %s reported twice", fe.Field)
				}
				got[fe.Field] = fe.Detail
			}
			if diff := cmp.Diff(keys(tt.want), keys(got)); diff != "" {
				t.Errorf("fields (-want +got):\n%s\nerror: %v", diff, err)
			}
			for f, sub := range tt.want {
				if !strings.Contains(got[f], sub) {
					t.Errorf("%s: detail %q does not contain %q", f, got[f], sub)
				}
			}
		})
	}
}

func keys(m map[string]string) map[string]bool {
	k := map[string]bool{}
	for f := range m {
		k[f] = true
	}
	return k
}

func TestRequiredLiteral(t *testing.T) {
	tests := []struct {
		pattern, want string
		fold          bool
	}{
		{`step_time: (?P<value>[0-9.]+)`, "step_time: ", false},
		{`^\s*loss=(?P<value>\S+)`, "loss=", false},
		{`step (?P<step>\d+) .* tflops=(?P<value>\S+)`, " tflops=", false},
		{`(?:throughput)+ (?P<value>\d+)`, "throughput", false},
		{`(?i)Loss: (?P<value>\S+)`, "loss: ", true},
		{`(?i:TFLOPS) (?P<value>\S+) per chip`, " per chip", false},
		{`(?i)Größe (?P<value>\S+)`, "", false},
		{`(?:loss|acc): (?P<value>\S+)`, ": ", false},
		{`(?:loss|acc)(?P<value>\d+)`, "", false},
	}
	for _, tt := range tests {
		p, err := Compile([]Spec{{Name: "m", Pattern: tt.pattern}})
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.pattern, err)
		}
		if got, fold := string(p.patterns[0].lit), p.patterns[0].fold; got != tt.want || fold != tt.fold {
			t.Errorf("literal of %q = %q fold %v, want %q fold %v", tt.pattern, got, fold, tt.want, tt.fold)
		}
	}
}

// FuzzPrefilter holds the literal prefilter to its promise: it never
// rejects a line the regexp matches.
func FuzzPrefilter(f *testing.F) {
	for _, s := range []string{
		"step_time: 0.4", "STEP_TIME: 1", "Step_Time: 1", "ſtep_time: 1", "step_time:", "x step_time: 1 y",
		"tflops 3", "TFLOPS 3", "tflopſ 3", "\u212a 3", "loss=1", "step 3 loss=1", "", "é", "step_tim",
	} {
		f.Add(s)
	}
	p := mustCompile(f, append(testSpecs,
		Spec{Name: "kelvin", Pattern: `(?i)k (?P<value>\d+)`},
		Spec{Name: "s", Pattern: `(?i)step_time: (?P<value>\d+)`}))
	f.Fuzz(func(t *testing.T, line string) {
		for _, pt := range p.patterns {
			if !pt.mayMatch([]byte(line)) && pt.re.MatchString(line) {
				t.Fatalf("%s: prefilter %q (fold %v) rejects %q, which matches", pt.name, pt.lit, pt.fold, line)
			}
		}
	})
}

func TestContainsFold(t *testing.T) {
	tests := []struct {
		line, lit string
		want      bool
	}{
		{"x TFLOPS y", "tflops", true},
		{"tflops", "tflops", true},
		{"TfLoPs", "tflops", true},
		{"tflop", "tflops", false},
		{"tflo ps", "tflops", false},
		{"", "a", false},
		{"abc é", "zzz", true}, // non-ASCII: left to the regexp
		{"zzé", "zzz", true},
	}
	for _, tt := range tests {
		if got := containsFold([]byte(tt.line), []byte(tt.lit)); got != tt.want {
			t.Errorf("containsFold(%q, %q) = %v, want %v", tt.line, tt.lit, got, tt.want)
		}
	}
}
