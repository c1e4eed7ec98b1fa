// Package yamlnode holds the small helpers that Falcon's strict YAML readers
// (experiment manifests, cluster registry files) share: walking yaml.Node
// trees by hand is what lets them name the exact field path and line of every
// problem, which a plain Unmarshal cannot.
package yamlnode

import (
	"slices"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"
	"go.yaml.in/yaml/v3"
)

// Resolve follows aliases (*anchor) to the node they name.
func Resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is absent or an explicit null.
func IsNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// Describe names what a node is, for "must be X, got Y" messages.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return strconv.Quote(n.Value)
		default:
			return n.Value
		}
	}
	return "an unsupported YAML node"
}

// Key is how a mapping key appears in a field path. An empty key ("": x)
// would give an empty path, or one ending in ".", and so an error naming no
// field; it is shown as the user must write it. (Found by FuzzParse.)
func Key(k string) string {
	if k == "" {
		return `""`
	}
	return k
}

// Join appends key to a dotted field path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Fields calls fn for each key of mapping n, reporting problems through
// fail. With allowed non-nil, other keys are errors listing what is allowed;
// with allowed nil, any key is accepted (role names, cluster names, labels).
// Duplicate and merge keys are errors: YAML parsers disagree on which
// duplicate wins, so a file Falcon reads must not depend on it.
func Fields(path string, n *yaml.Node, allowed []string,
	fail func(path string, at *yaml.Node, format string, args ...any),
	fn func(key, path string, k, v *yaml.Node)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Resolve(n.Content[i]), Resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			fail(Join(path, "?"), k, "keys must be strings, got %s", Describe(k))
			continue
		}
		key := k.Value
		kpath := Join(path, Key(key))
		if k.Tag == "!!merge" {
			fail(kpath, k, "YAML merge keys are not supported; write the fields out")
			continue
		}
		if line, dup := seen[key]; dup {
			fail(kpath, k, "duplicate key (first at line %d)", line)
			continue
		}
		seen[key] = k.Line
		if allowed != nil && !slices.Contains(allowed, key) {
			if near := Nearest(key, allowed); near != "" {
				fail(kpath, k, "unknown field; did you mean %s? allowed: %s", near, strings.Join(allowed, ", "))
			} else {
				fail(kpath, k, "unknown field; allowed: %s", strings.Join(allowed, ", "))
			}
			continue
		}
		fn(key, kpath, k, v)
	}
}

// Nearest is the name in names that key most likely misspells: the closest
// by edit distance (letters added, dropped or changed, with '-' and '_'
// alike), if it is within 2 edits and fewer than half of key's letters; ""
// when none is.
func Nearest(key string, names []string) string {
	typed := strings.ReplaceAll(strings.ToLower(key), "-", "_")
	best, bestD := "", 3
	for _, n := range names {
		if d := levenshtein.ComputeDistance(typed, n); d < bestD && 2*d < len(key) {
			best, bestD = n, d
		}
	}
	return best
}
