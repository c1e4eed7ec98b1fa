package runmetrics

import (
	"bytes"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Limits on what a manifest may declare. Every rank-0 log line is tried
// against every pattern, so their number bounds the cost of extraction.
const (
	MaxSpecs        = 64
	MaxNameLen      = 128
	MaxPatternBytes = 1024
)

// Directions a metric improves in; the comparison of experiments reads them.
const (
	BetterLower  = "lower"
	BetterHigher = "higher"
)

// StepField is the metrics.jsonl field that carries the step. It is never a
// metric, so no spec may take its name.
const StepField = "step"

// Group names a pattern uses to capture the value and, optionally, the step.
const (
	ValueGroup = "value"
	StepGroup  = "step"
)

// Spec is one entry of the manifest's top-level `metrics:` list: a metric
// that rank 0 prints in its log, found by Pattern.
type Spec struct {
	Name    string `json:"name" yaml:"name"`
	Pattern string `json:"pattern" yaml:"pattern"`
	Better  string `json:"better,omitempty" yaml:"better,omitempty"`
}

// nameRule is what a metric name may be, both in a spec and as a key of
// metrics.jsonl: names end up in SQL rows, CLI flags (--series NAME) and
// URLs, so they stay plain.
var nameRule = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_./-]*$`)

const nameRuleText = "must be 1-128 characters of letters, digits and _ . / -, starting with a letter or _"

func validName(s string) bool { return len(s) <= MaxNameLen && nameRule.MatchString(s) }

// pattern is one compiled spec.
type pattern struct {
	name   string
	better string
	re     *regexp.Regexp
	value  int // submatch index of the value group
	step   int // submatch index of the step group, -1 without one
	// lit is a literal every match contains. Most log lines match no
	// pattern, and looking for a literal rejects them far faster than
	// running the regexp does. fold says lit is to be found ignoring case
	// (the pattern has (?i)); lit is then lower-case ASCII.
	lit  []byte
	fold bool
}

// mayMatch reports whether line can match p: false only if it lacks p's
// literal.
func (p *pattern) mayMatch(line []byte) bool {
	switch {
	case len(p.lit) == 0:
		return true
	case !p.fold:
		return bytes.Contains(line, p.lit)
	}
	return containsFold(line, p.lit)
}

// containsFold reports whether line contains lit (lower-case ASCII),
// ignoring ASCII case. Unicode folds two ASCII letters to other letters
// (k to U+212A KELVIN SIGN, s to U+017F LONG S), which only a line with
// non-ASCII bytes can hold; such a line is let through to the regexp.
func containsFold(line, lit []byte) bool {
	c0, c1 := lit[0], lit[0]
	if 'a' <= c0 && c0 <= 'z' {
		c1 = c0 - 'a' + 'A'
	}
	for i := 0; i+len(lit) <= len(line); i++ {
		if b := line[i]; b >= utf8.RuneSelf {
			return true
		} else if b != c0 && b != c1 {
			continue
		}
		if asciiEqualFold(line[i:i+len(lit)], lit) {
			return true
		}
	}
	// The tail shorter than lit may still hold non-ASCII bytes.
	for _, b := range line[max(0, len(line)-len(lit)+1):] {
		if b >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

func asciiEqualFold(s, lower []byte) bool {
	for i, b := range s {
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if b != lower[i] {
			return false
		}
	}
	return true
}

// Patterns is a validated, compiled set of specs. It is immutable and safe
// for concurrent use by any number of Extractors.
type Patterns struct {
	specs    []Spec
	patterns []pattern
}

// Specs returns the specs Patterns was compiled from, in their order.
func (p *Patterns) Specs() []Spec {
	if p == nil {
		return nil
	}
	return append([]Spec(nil), p.specs...)
}

// Compile validates specs and compiles their patterns. It reports every
// problem at once, as errdefs.FieldErrors (an InvalidArgument) whose fields
// are metrics[i].name, metrics[i].pattern and metrics[i].better, so a user
// fixes the manifest in one round trip. No specs is valid: the job may
// report metrics through metrics.jsonl alone.
func Compile(specs []Spec) (*Patterns, error) {
	var errs errdefs.FieldErrors
	if len(specs) > MaxSpecs {
		errs.Add("metrics", "at most %d metrics may be declared, got %d", MaxSpecs, len(specs))
		return nil, errs.Err()
	}
	p := &Patterns{specs: append([]Spec(nil), specs...)}
	seen := make(map[string]int, len(specs))
	for i, s := range specs {
		field := fmt.Sprintf("metrics[%d]", i)
		switch {
		case s.Name == "":
			errs.Add(field+".name", "is required and %s", nameRuleText)
		case !validName(s.Name):
			errs.Add(field+".name", "%q %s", s.Name, nameRuleText)
		case s.Name == StepField:
			errs.Add(field+".name", "%q is reserved: it is the step of every metric, not a metric", s.Name)
		default:
			if j, dup := seen[s.Name]; dup {
				errs.Add(field+".name", "%q is already declared by metrics[%d]; names must be unique", s.Name, j)
			} else {
				seen[s.Name] = i
			}
		}
		switch s.Better {
		case "", BetterLower, BetterHigher:
		default:
			errs.Add(field+".better", "%q is not allowed: use %q, %q or leave it empty", s.Better, BetterLower, BetterHigher)
		}
		pt, msg := compilePattern(s.Pattern)
		if msg != "" {
			errs.Add(field+".pattern", "%s", msg)
			continue
		}
		pt.name, pt.better = s.Name, s.Better
		p.patterns = append(p.patterns, pt)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// compilePattern returns the compiled pattern or a message saying what is
// wrong and what is allowed.
func compilePattern(expr string) (pattern, string) {
	const want = "an RE2 regular expression with a named group (?P<value>...) capturing the number, and optionally (?P<step>...) capturing the integer step"
	switch {
	case expr == "":
		return pattern{}, "is required: " + want
	case len(expr) > MaxPatternBytes:
		return pattern{}, fmt.Sprintf("is %d bytes, the limit is %d", len(expr), MaxPatternBytes)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		// regexp's message names the offending part ("missing closing )"),
		// and says "invalid or unsupported Perl syntax" for what RE2 lacks
		// (backreferences, lookaround).
		return pattern{}, fmt.Sprintf("does not compile as RE2 (%v); must be %s", err, want)
	}
	pt := pattern{re: re, value: re.SubexpIndex(ValueGroup), step: re.SubexpIndex(StepGroup)}
	if pt.value < 0 {
		return pattern{}, fmt.Sprintf("%q has no group named %q; must be %s", expr, ValueGroup, want)
	}
	if re.MatchString("") {
		// It would match every line of the log, and every line without a
		// number would count as skipped.
		return pattern{}, fmt.Sprintf("%q matches an empty line; it must require some text, e.g. 'loss: (?P<value>[0-9.eE+-]+)'", expr)
	}
	if tree, err := syntax.Parse(expr, syntax.Perl); err == nil {
		lit, fold := requiredLiteral(tree.Simplify())
		pt.lit, pt.fold = []byte(lit), fold
	}
	return pt, ""
}

// requiredLiteral returns the longest literal that every match of re must
// contain, or "" if it cannot tell. It only looks through concatenations
// and groups, which is where the literal of a log pattern ("step_time: ",
// "loss=") sits. A case-insensitive literal is returned in lower case with
// fold set, and only if it is ASCII.
func requiredLiteral(re *syntax.Regexp) (lit string, fold bool) {
	switch re.Op {
	case syntax.OpLiteral:
		s := string(re.Rune)
		if re.Flags&syntax.FoldCase == 0 {
			return s, false
		}
		for _, r := range re.Rune {
			if r >= utf8.RuneSelf {
				return "", false
			}
		}
		return strings.ToLower(s), true
	case syntax.OpCapture, syntax.OpPlus: // x+ contains x at least once
		return requiredLiteral(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			// Prefer an exact literal to a longer case-folded one: the
			// exact search is the faster.
			if l, f := requiredLiteral(sub); len(l) > 0 && (lit == "" || fold && !f || fold == f && len(l) > len(lit)) {
				lit, fold = l, f
			}
		}
		return lit, fold
	}
	return "", false
}

// String lists the metric names, for logs and test failures.
func (p *Patterns) String() string {
	if p == nil {
		return "metrics[]"
	}
	names := make([]string, len(p.patterns))
	for i, pt := range p.patterns {
		names[i] = pt.name
	}
	return "metrics[" + strings.Join(names, " ") + "]"
}
