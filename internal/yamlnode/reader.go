package yamlnode

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Reader reads the typed values of a YAML document strictly, collecting
// every problem as a field error that names the path and the line, so a
// file is refused whole with all its mistakes at once. Manifests and
// cluster files embed one.
type Reader struct {
	Errs errdefs.FieldErrors
}

// Fail records a problem at path, on n's line.
func (r *Reader) Fail(path string, n *yaml.Node, format string, args ...any) {
	r.Errs.Add(path, "%s (line %d)", fmt.Sprintf(format, args...), n.Line)
}

// ExpectMapping reports whether n is a mapping, recording why not.
func (r *Reader) ExpectMapping(path string, n *yaml.Node) bool {
	if n.Kind == yaml.MappingNode {
		return true
	}
	r.Fail(path, n, "must be a mapping, got %s", Describe(n))
	return false
}

// Str reads a string. Any scalar is taken as written (device_topo: 2x2x1,
// project: 1234); null means unset.
func (r *Reader) Str(path string, n *yaml.Node) string {
	if IsNull(n) {
		return ""
	}
	if n.Kind != yaml.ScalarNode {
		r.Fail(path, n, "must be a string, got %s", Describe(n))
		return ""
	}
	return n.Value
}

// Integer reads an integer within [lo, hi]. Quoted numbers are refused:
// strictness is what catches `replica: "two"`, and "2" is no different to
// a parser. Null means 0.
func (r *Reader) Integer(path string, n *yaml.Node, lo, hi int64) int64 {
	if IsNull(n) {
		return 0
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		r.Fail(path, n, "must be an integer, got %s", Describe(n))
		return 0
	}
	var v int64
	if err := n.Decode(&v); err != nil || v < lo || v > hi {
		r.Fail(path, n, "must be an integer between %d and %d, got %s", lo, hi, n.Value)
		return 0
	}
	return v
}

// Bool reads true or false; quoted strings and yes/no are refused, as
// integers are. Null means false.
func (r *Reader) Bool(path string, n *yaml.Node) bool {
	if IsNull(n) {
		return false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		r.Fail(path, n, "must be true or false, got %s", Describe(n))
		return false
	}
	var v bool
	if err := n.Decode(&v); err != nil {
		r.Fail(path, n, "must be true or false, got %s", n.Value)
		return false
	}
	return v
}

// Duration reads a Go duration such as 2h, 90m or 1h30m. Null means unset
// (ok false).
func (r *Reader) Duration(path string, n *yaml.Node) (d time.Duration, ok bool) {
	if IsNull(n) {
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		r.Fail(path, n, "must be a duration such as 2h, 90m or 1h30m, got %s", Describe(n))
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		r.Fail(path, n, "must be a duration such as 2h, 90m or 1h30m, got %q", n.Value)
		return 0, false
	}
	return d, true
}

// StringMap reads a mapping of names to scalars, each kept as written
// (PORT: 8080 is "8080"): value says which nodes are allowed and what they
// read as, and want names the rest in the error. key, if set, sees each
// key's node (a caller recording lines). Null means unset.
func (r *Reader) StringMap(path string, n *yaml.Node, want string, value func(v *yaml.Node) (string, bool), key func(kpath string, k *yaml.Node)) map[string]string {
	if IsNull(n) || !r.ExpectMapping(path, n) {
		return nil
	}
	out := map[string]string{}
	Fields(path, n, nil, r.Fail, func(name, kpath string, k, v *yaml.Node) {
		if key != nil {
			key(kpath, k)
		}
		if s, ok := value(v); ok {
			out[name] = s
			return
		}
		r.Fail(kpath, v, "must be %s, got %s", want, Describe(v))
	})
	return out
}

// AnyScalar is a StringMap value: any scalar as written, null as "".
func AnyScalar(v *yaml.Node) (string, bool) {
	switch {
	case IsNull(v):
		return "", true
	case v.Kind == yaml.ScalarNode:
		return v.Value, true
	}
	return "", false
}
