package yamlnode

import (
	"fmt"

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
