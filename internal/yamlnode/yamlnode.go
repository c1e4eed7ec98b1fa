// Package yamlnode holds the small helpers that Falcon's strict YAML readers
// (experiment manifests, cluster registry files) share: walking yaml.Node
// trees by hand is what lets them name the exact field path and line of every
// problem, which a plain Unmarshal cannot.
package yamlnode

import (
	"strconv"

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

// Join appends key to a dotted field path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
